use offload_rt::kernel::DisjointSlice;
use offload_rt::kernel;

#[kernel]
pub fn mutable_slice(out: &mut [u32]) {
    let _ = out;
}

#[kernel]
pub fn len_on_a_scalar(#[len(4)] n: u32) {
    let _ = n;
}

#[kernel]
pub fn len_without_a_value(#[len] x: &[u32]) {
    let _ = x;
}

#[kernel]
pub fn slice_of_char(letters: &[char]) {
    let _ = letters;
}

#[kernel]
pub fn disjoint_of_char(mut out: DisjointSlice<char>) {
    let _ = out.for_thread();
}

fn main() {}
