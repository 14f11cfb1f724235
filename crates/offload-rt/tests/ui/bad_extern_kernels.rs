use offload_rt::extern_kernels;

extern_kernels! {
    fn takes_a_slice(x: &[f32]);
    fn takes_a_disjoint_slice(x: offload_rt::kernel::DisjointSlice<f32>);
    fn takes_an_array(x: [f32; 4]);
    fn takes_a_reference(x: &f32);
    fn takes_a_tuple(pair: (f32, u32));
    unsafe fn marked_unsafe(x: *mut f32);
    extern "C" fn with_an_abi(x: *mut f32);
    fn generic<T>(x: *mut T);
    fn returns(x: *mut f32) -> i32;
    fn with_self(self);
    fn len_on_a_scalar(#[len(4)] n: i32);
    #[link_name = "a,b"]
    fn bad_symbol(x: *mut f32);
    #[link_name = "a"]
    #[link_name = "b"]
    fn two_symbols(x: *mut f32);
    #[link_name("a")]
    fn symbol_not_a_string(x: *mut f32);
    #[inline]
    fn other_attribute(x: *mut f32);
}

fn main() {}
