//! Readers of the device images the build makes or takes in, for what the image says about
//! its kernels: [`ptx`] (`.entry` declarations, and the report of `ptxas -v`), [`elf`] (the
//! CPU device's and OpenMP's host-CPU shared objects) and [`amdgpu`] (code objects' `e_flags`
//! and metadata note). Pure functions of the bytes or text handed in; running the tools that
//! make the images is the build's.

#[cfg(feature = "containers")]
pub mod amdgpu;
#[cfg(feature = "containers")]
pub mod elf;
pub mod ptx;
