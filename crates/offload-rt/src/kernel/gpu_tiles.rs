//! The GPU side of [`generic_shared_array!`](crate::generic_shared_array!): a call the device
//! link replaces with an array in the shared address space, one per site and instantiation
//! (`offload_format::abi::GENERIC_TILE_FUNCTION`).

unsafe extern "C" {
    /// Never defined: the device link replaces each call, whose arguments are constants once
    /// the function around it is instantiated, and refuses a module where one is left.
    #[link_name = offload_format::abi_name!(GENERIC_TILE_FUNCTION)]
    fn __offload_shared_tile(
        site: *const u8,
        type_name: *const u8,
        type_name_len: usize,
        size: usize,
        align: usize,
    ) -> *mut u8;
}

/// The shared array of the `generic_shared_array!` at `site` for the array type named
/// `type_name`: `size` bytes aligned to `align`.
#[inline(always)]
pub fn generic_shared_tile(
    site: &'static u8,
    type_name: &'static str,
    size: usize,
    align: usize,
) -> *mut u8 {
    // SAFETY: the device link replaces the call with the address of the site's array; it
    // reads the arguments as constants and makes no other use of them.
    unsafe { __offload_shared_tile(site, type_name.as_ptr(), type_name.len(), size, align) }
}
