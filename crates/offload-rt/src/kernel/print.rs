//! Device prints: [`device_print!`](crate::device_print) and
//! [`device_println!`](crate::device_println) send a template and scalar arguments; the host
//! formats and prints the line after the launch (CUDA `printf`'s manner), on every device.

use super::abi::{PrintArg, PrintTag};

/// A value a device print can show: integers, floats, `bool`, `char` (and with the `half`
/// feature `half::f16`, `half::bf16`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be shown by a device print",
    note = "device prints send scalars to the host: integers, f32, f64, bool, char (and half::f16, half::bf16 with offload-rt's `half` feature); print a struct's fields one by one"
)]
pub trait Printable: Copy {
    /// The value as a print argument.
    fn print_arg(self) -> PrintArg;
}

const fn arg<T>(tag: PrintTag, bits: u64) -> PrintArg {
    PrintArg {
        tag: tag as u32,
        size: core::mem::size_of::<T>() as u32,
        bits,
    }
}

macro_rules! printable {
    ($tag:ident as $via:ty: $($t:ty),*) => {$(
        impl Printable for $t {
            #[inline(always)]
            fn print_arg(self) -> PrintArg {
                arg::<$t>(PrintTag::$tag, self as $via as u64)
            }
        }
    )*};
}

printable!(Unsigned as u64: u8, u16, u32, u64, usize);
printable!(Signed as i64: i8, i16, i32, i64, isize);

impl Printable for f32 {
    #[inline(always)]
    fn print_arg(self) -> PrintArg {
        arg::<f32>(PrintTag::F32, u64::from(self.to_bits()))
    }
}

impl Printable for f64 {
    #[inline(always)]
    fn print_arg(self) -> PrintArg {
        arg::<f64>(PrintTag::F64, self.to_bits())
    }
}

impl Printable for bool {
    #[inline(always)]
    fn print_arg(self) -> PrintArg {
        arg::<bool>(PrintTag::Bool, u64::from(self))
    }
}

impl Printable for char {
    #[inline(always)]
    fn print_arg(self) -> PrintArg {
        arg::<char>(PrintTag::Char, u64::from(u32::from(self)))
    }
}

#[cfg(feature = "half")]
impl Printable for ::half::f16 {
    #[inline(always)]
    fn print_arg(self) -> PrintArg {
        arg::<u16>(PrintTag::F16, u64::from(self.to_bits()))
    }
}

#[cfg(feature = "half")]
impl Printable for ::half::bf16 {
    #[inline(always)]
    fn print_arg(self) -> PrintArg {
        arg::<u16>(PrintTag::Bf16, u64::from(self.to_bits()))
    }
}

impl<T: Printable> Printable for &T {
    #[inline(always)]
    fn print_arg(self) -> PrintArg {
        (*self).print_arg()
    }
}

/// The argument for `value` (called by the macros).
#[inline(always)]
pub fn print_arg<T: Printable>(value: &T) -> PrintArg {
    value.print_arg()
}

/// Sends one print: `template` is normalized by the macro (every placeholder `{N[:spec]}`).
#[inline(never)]
pub fn print(template: &str, args: &[PrintArg]) {
    #[cfg(all(offload_device, any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    super::gpu_channel::print(template, args);
    #[cfg(all(
        offload_device,
        not(any(target_arch = "nvptx64", target_arch = "amdgpu"))
    ))]
    super::cpu::print(template, args);
    #[cfg(not(offload_device))]
    let _ = (template, args);
}
