use offload_rt::{kernel, shared_array};

#[kernel]
pub fn too_much_shared_memory(out: *mut u32) {
    let tile: *mut u32 = shared_array!(u32, 12 * 1024 + 1);
    // SAFETY: never launched; the array does not compile.
    unsafe { *out = *tile };
}

fn main() {}
