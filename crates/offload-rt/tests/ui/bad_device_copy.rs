use offload_rt::{DeviceCopy, kernel};

#[derive(Clone, Copy, DeviceCopy)]
pub struct NotReprC {
    pub a: u32,
}

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Padded {
    pub a: u8,
    pub b: u32,
}

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct HoldsAChar {
    pub letter: char,
}

#[derive(Clone, Copy, DeviceCopy)]
pub enum NoRepr {
    A,
}

#[derive(Clone, Copy, DeviceCopy)]
#[repr(u8)]
pub enum NoZero {
    One = 1,
    Two = 2,
}

#[derive(Clone, Copy, DeviceCopy)]
#[repr(u32)]
pub enum WithFields {
    A,
    B(u32),
}

#[derive(Clone, Copy)]
#[repr(C)]
pub struct NotDerived {
    pub a: u32,
}

#[kernel]
pub fn takes_a_plain_struct(params: NotDerived, out: *mut u32) {
    let _ = (params, out);
}

fn main() {}
