use offload_rt::kernel;

#[kernel]
pub fn takes_a_reference(x: &u32) {
    let _ = x;
}

#[kernel]
pub fn returns_a_value(n: u32) -> u32 {
    n
}

#[kernel]
pub fn char_param(letter: char) {
    let _ = letter;
}

fn main() {}
