//! `#[kernel]`: marks a function of a kernel crate as a kernel.
//!
//! ```ignore
//! #[offload_rt::kernel]
//! pub fn saxpy(a: f32, #[len(y.len())] x: &[f32], mut y: DisjointSlice<f32>) { /* device code */ }
//! ```
//!
//! Parameters are passed by value when they are `DeviceCopy`: scalars (`u8`..`u64`,
//! `i8`..`i64`, `usize`, `isize`, `f32`, `f64`; `half::f16` and `half::bf16` with offload-rt's
//! `half` feature), `#[derive(DeviceCopy)] #[repr(C)]` structs and arrays of these; buffers as
//! read-only slices `&[T]` and `DisjointSlice<T>` (address and length); and device pointers
//! `*const T` / `*mut T`. `#[len(expr)]` on a buffer parameter is the number of elements the
//! launch needs, checked by the host before it. The attribute emits:
//!
//! - always, the body as a private function (so kernel code type-checks with the host build);
//! - in device builds (`--cfg offload_device`, evaluated inside offload-rt so kernel crates
//!   need not declare it), the device entry points for the target being built: on the
//!   CPU device `__offload_cpu_run_<name>` (a range of blocks, the thread loop with the body
//!   inlined) and `__offload_cpu_thread_<name>` (one thread, for barriers); on GPUs an
//!   `extern "gpu-kernel"` function named `<name>` taking the parameters' launch ABI values;
//! - otherwise, a host handle: a unit struct named like the kernel whose `launch` takes the
//!   device, a `LaunchConfig` and one argument per parameter: values by value, `&[T]` and
//!   `*const T` as `&DeviceBuffer<T>`, `DisjointSlice<T>` and `*mut T` as
//!   `&mut DeviceBuffer<T>`, so argument types are checked at compile time. It is an
//!   `unsafe fn` when the kernel takes a raw pointer, a safe one otherwise.
//!
//! A kernel generic over types and constants lists its instantiations in the attribute,
//! `#[kernel(T = f32 | f64)]`; each is expanded as above under its own name, and the host
//! handle is generic (`axpy::<f32>`) (`generic.rs`).
//!
//! [`extern_kernels!`] (`foreign.rs`) makes the same handles for CUDA and HIP kernels from
//! declarations of their signatures; they find their kernel by symbol name at run time.
#![deny(missing_docs)]

mod entry;
mod foreign;
mod generic;
mod kernels;
mod params;
mod print;
mod regions;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, quote_spanned};
use syn::ItemFn;
use syn::spanned::Spanned;

/// `device_print!("template", args…)`: prints from a kernel, without a newline.
///
/// The template is Rust's format syntax: `{}`, `{0}`, `{name}` (a named argument or a variable
/// of the kernel), with the specs `[[fill]align][+][#][0][width][.precision][?|x|X|o|b|e|E]`;
/// widths and precisions are literal numbers. Arguments are scalars (`offload_rt::kernel::
/// Printable`). It is checked at compile time; the device sends the template and the values,
/// and the host formats the text as `format!` would and prints it after the launch (GPUs: at
/// the next synchronization or copy to the host).
#[proc_macro]
pub fn device_print(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as print::PrintInput);
    print::expand(input, false)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// `device_println!("template", args…)`: [`device_print!`] with a newline.
#[proc_macro]
pub fn device_println(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as print::PrintInput);
    print::expand(input, true)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// `extern_kernels! { fn name(params); … }`: launch handles for kernels written in CUDA or
/// HIP (built by `offload-build`'s `Build::cuda`/`Build::hip`), as `#[kernel]` gives for Rust
/// kernels.
///
/// ```ignore
/// offload_rt::extern_kernels! {
///     /// `extern "C" __global__ void scale(float *x, float a, int n)`
///     pub fn scale(x: *mut f32, a: f32, n: i32);
///     /// A C++ kernel, by its mangled name.
///     #[link_name = "_Z9scale_cppPffi"]
///     pub fn scale_cpp(#[len(n)] x: *mut f32, a: f32, n: i32);
/// }
/// ```
///
/// Each declaration becomes a unit struct whose `unsafe fn launch(&self, device, config,
/// args…)` takes `&DeviceBuffer<T>` for `*const T`, `&mut DeviceBuffer<T>` for `*mut T` and
/// `DeviceCopy` values by value; `load(&self, device)` finds the kernel without launching it.
/// The kernel is found by its symbol name (the function's name, or `#[link_name]`) in the
/// images the device loads, and where its image records its parameter sizes they must be the
/// declared ones. Slices and `DisjointSlice` are for Rust kernels only.
#[proc_macro]
pub fn extern_kernels(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as foreign::Declarations);
    foreign::expand(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// See the crate documentation.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = TokenStream2::from(attr);
    let item = syn::parse_macro_input!(item as ItemFn);
    match take_helpers(item).and_then(|(item, helpers)| entry::expand(attr, item, &helpers)) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `#[kernels]`: on an inline module of kernels and the functions they call, lets the CPU
/// device run in region form (loops over a block's threads) the kernels that reach a barrier
/// or a warp operation through a function of the module.
///
/// ```ignore
/// #[offload_rt::kernels]
/// mod scan {
///     use offload_rt::kernel::*;
///
///     /// An inclusive scan of one value per thread over the block, through `tile`.
///     fn block_scan(tile: *mut u32, v: u32) -> u32 { /* … sync_threads() … */ }
///
///     #[kernel]
///     pub fn scan_blocks(data: *mut u32) {
///         let i = global_idx_x();
///         let tile = shared_array!(u32, 256);
///         let s = unsafe { block_scan(tile, *data.add(i)) };
///         unsafe { *data.add(i) = s };
///     }
/// }
/// ```
///
/// `#[kernel]` alone sees only its own body, and a barrier in a called function keeps the
/// kernel on the CPU device's slower path, one coroutine per GPU thread. Under `#[kernels]`,
/// each kernel's CPU region form is built with the module's functions that synchronize
/// inlined where they are called as a statement's whole value (`f(..);`, `let x = f(..);`,
/// `x += f(..);`), or inside a larger expression where nothing before the call in the
/// statement has an effect (`let e = f(..) - x;`). GPU images are unchanged. What cannot be
/// inlined (a generic function, a method, `return` or `?` in the function, a `shared_array!`
/// in it, a reference to a thread's local passed to it, a call on a branch of `&&`, `||`, `if`
/// or `match`) keeps the coroutine path, and the build says why.
#[proc_macro_attribute]
pub fn kernels(attr: TokenStream, item: TokenStream) -> TokenStream {
    match kernels::expand(attr.into(), item.into()) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `item` without the `#[__offload_helpers(..)]` attribute `#[kernels]` gave it, and the
/// functions it held.
fn take_helpers(mut item: ItemFn) -> syn::Result<(ItemFn, Vec<ItemFn>)> {
    let mut helpers = Vec::new();
    let mut error = None;
    item.attrs.retain(|a| {
        if !a.path().is_ident(regions::inline::HELPERS_ATTR) {
            return true;
        }
        match a.parse_args::<regions::inline::Helpers>() {
            Ok(h) => helpers.extend(h.0),
            Err(e) => error = Some(e),
        }
        false
    });
    match error {
        Some(e) => Err(e),
        None => Ok((item, helpers)),
    }
}

/// `#[derive(DeviceCopy)]`: implements `offload_rt::DeviceCopy` for a `#[repr(C)]` struct
/// whose fields are all `DeviceCopy`, checking at compile time that it has no padding (device
/// code and the host copy it bytewise), or for a fieldless enum with a primitive `repr` and a
/// variant whose discriminant is zero (device buffers start zeroed). Reads of device memory as
/// an enum, or as a struct with fields that have invalid bit patterns, are checked.
#[proc_macro_derive(DeviceCopy)]
pub fn derive_device_copy(item: TokenStream) -> TokenStream {
    let item = syn::parse_macro_input!(item as syn::DeriveInput);
    match expand_device_copy(item) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_device_copy(item: syn::DeriveInput) -> syn::Result<TokenStream2> {
    let name = &item.ident;
    let data = match &item.data {
        syn::Data::Struct(data) => data,
        syn::Data::Enum(data) => return expand_device_copy_enum(&item, data),
        syn::Data::Union(u) => {
            return Err(syn::Error::new(
                u.union_token.span(),
                "#[derive(DeviceCopy)] is for structs and fieldless enums: which field of a union \
                 holds a value is not known",
            ));
        }
    };
    let mut repr_c = false;
    for attr in item.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") || meta.path.is_ident("transparent") {
                repr_c = true;
            } else if meta.path.is_ident("align") || meta.path.is_ident("packed") {
                // `align(16)`, `packed(2)` or `packed`: the layout stays C's, the padding
                // check below covers what they change.
                if meta.input.peek(syn::token::Paren) {
                    let content;
                    syn::parenthesized!(content in meta.input);
                    content.parse::<syn::LitInt>()?;
                }
            }
            Ok(())
        })?;
    }
    if !repr_c {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "#[derive(DeviceCopy)] needs `#[repr(C)]` on `{name}`: the host and every device \
                 must agree on its layout"
            ),
        ));
    }
    let fields: Vec<_> = data.fields.iter().collect();
    // One check per field, named after it, so that a type error names the field ("required by
    // a bound in `field_x`"); its value is what the struct's own validity needs of the field.
    let check_names: Vec<_> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| match &f.ident {
            Some(id) => format_ident!("field_{}", id),
            None => format_ident!("field_{}", i),
        })
        .collect();
    let field_consts: Vec<_> = (0..fields.len())
        .map(|i| format_ident!("__OFFLOAD_FIELD_{}", i))
        .collect();
    let checks = fields
        .iter()
        .zip(&check_names)
        .zip(&field_consts)
        .map(|((f, check), field)| {
            let ty = &f.ty;
            quote_spanned! {ty.span()=>
                #[allow(non_snake_case)]
                const fn #check<T: ::offload_rt::DeviceCopy>() -> (bool, fn(&[u8]) -> bool) {
                    (T::__OFFLOAD_ANY_BITS, T::__offload_valid)
                }
                const #field: (bool, fn(&[u8]) -> bool) = #check::<#ty>();
            }
        });
    let sizes = fields.iter().map(|f| {
        let ty = &f.ty;
        quote!(::core::mem::size_of::<#ty>())
    });
    let message = format!(
        "#[derive(DeviceCopy)]: `{name}` has padding bytes; add explicit fields for them \
         (device code may write any bytes, and padding is not copied reliably)"
    );
    // A field with invalid bit patterns (`bool`, an enum) makes the struct one: its bytes are
    // checked, field by field, where the host reads device memory as the struct.
    let field_tys: Vec<_> = fields.iter().map(|f| &f.ty).collect();
    let field_names: Vec<TokenStream2> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| match &f.ident {
            Some(id) => quote!(#id),
            None => {
                let index = syn::Index::from(i);
                quote!(#index)
            }
        })
        .collect();
    let validity = quote! {
        const __OFFLOAD_ANY_BITS: bool =
            true #(&& <#field_tys as ::offload_rt::DeviceCopy>::__OFFLOAD_ANY_BITS)*;
        #[inline]
        fn __offload_valid(bytes: &[u8]) -> bool {
            true #(&& <#field_tys as ::offload_rt::DeviceCopy>::__offload_valid(
                &bytes[::core::mem::offset_of!(Self, #field_names)..]
                    [..::core::mem::size_of::<#field_tys>()]
            ))*
        }
    };
    if !item.generics.params.is_empty() {
        // Whether an instantiation has padding depends on its type arguments: each field's
        // type must be `DeviceCopy`, and the padding check is the layout constant, which
        // buffers, copies and launches evaluate for the instantiations they use.
        let (impl_generics, ty_generics, where_clause) = item.generics.split_for_impl();
        let mut predicates: Vec<TokenStream2> = where_clause
            .map(|w| w.predicates.iter().map(|p| quote!(#p)).collect())
            .unwrap_or_default();
        for f in &fields {
            let ty = &f.ty;
            predicates.push(quote_spanned!(ty.span()=> #ty: ::offload_rt::DeviceCopy));
        }
        return Ok(quote! {
            // SAFETY: a `#[repr(C)]` struct whose fields are all `DeviceCopy` (the bounds
            // above) and that has no padding (the layout constant, evaluated for every
            // instantiation that crosses between host and device) has no pointers into host
            // memory, no padding, and every bit pattern is a valid value.
            unsafe impl #impl_generics ::offload_rt::DeviceCopy for #name #ty_generics
            where #(#predicates),*
            {
                const __OFFLOAD_LAYOUT: () = assert!(
                    ::core::mem::size_of::<Self>() == 0 #(+ #sizes)*,
                    #message
                );
                #validity
            }
        });
    }
    let field_tys = &field_tys;
    Ok(quote! {
        const _: () = {
            #(#checks)*
            assert!(
                ::core::mem::size_of::<#name>() == 0 #(+ #sizes)*,
                #message
            );
            // SAFETY: a `#[repr(C)]` struct without padding (asserted above) whose fields are
            // all `DeviceCopy` (checked above) has no pointers into host memory, no padding,
            // zero bytes as a value, and is valid where each field is.
            unsafe impl ::offload_rt::DeviceCopy for #name {
                const __OFFLOAD_ANY_BITS: bool = true #(&& #field_consts.0)*;
                #[inline]
                fn __offload_valid(bytes: &[u8]) -> bool {
                    true #(&& (#field_consts.1)(
                        &bytes[::core::mem::offset_of!(Self, #field_names)..]
                            [..::core::mem::size_of::<#field_tys>()]
                    ))*
                }
            }
        };
    })
}

/// `#[derive(DeviceCopy)]` on a fieldless enum with a primitive integer `repr`.
fn expand_device_copy_enum(
    item: &syn::DeriveInput,
    data: &syn::DataEnum,
) -> syn::Result<TokenStream2> {
    let name = &item.ident;
    if !item.generics.params.is_empty() {
        return Err(syn::Error::new(
            item.generics.span(),
            "#[derive(DeviceCopy)]: an enum crossing to the device cannot be generic",
        ));
    }
    let mut repr = None;
    for attr in item.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|meta| {
            const INTS: [&str; 8] = ["u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64"];
            if let Some(int) = INTS.iter().find(|int| meta.path.is_ident(int)) {
                repr = Some(format_ident!("{}", int, span = meta.path.span()));
            }
            Ok(())
        })?;
    }
    let Some(repr) = repr else {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "#[derive(DeviceCopy)] needs a primitive representation on the enum `{name}`, such \
                 as `#[repr(u32)]`: the host and every device must agree on its size"
            ),
        ));
    };
    if data.variants.is_empty() {
        return Err(syn::Error::new(
            name.span(),
            format!("#[derive(DeviceCopy)]: the enum `{name}` has no variants, so no values"),
        ));
    }
    if let Some(v) = data.variants.iter().find(|v| !v.fields.is_empty()) {
        return Err(syn::Error::new(
            v.fields.span(),
            format!(
                "#[derive(DeviceCopy)]: variant `{}` has fields; only fieldless enums can cross \
                 to the device (write a `#[repr(C)]` struct with a tag field instead)",
                v.ident
            ),
        ));
    }
    let variants: Vec<_> = data.variants.iter().map(|v| &v.ident).collect();
    let message = format!(
        "#[derive(DeviceCopy)]: the enum `{name}` needs a variant whose discriminant is 0 \
         (device buffers start zeroed, and zero bytes must be one of its values)"
    );
    Ok(quote! {
        const _: () = assert!(false #(|| #name::#variants as #repr == 0)*, #message);
        // SAFETY: a fieldless enum with a primitive representation is that integer: no
        // pointers or padding; zero is a variant (asserted above), and the check accepts exactly
        // the variants' discriminants.
        unsafe impl ::offload_rt::DeviceCopy for #name {
            const __OFFLOAD_ANY_BITS: bool = false;
            #[inline]
            fn __offload_valid(bytes: &[u8]) -> bool {
                let Ok(bytes) = <[u8; ::core::mem::size_of::<#repr>()]>::try_from(bytes) else {
                    return false;
                };
                let value = #repr::from_ne_bytes(bytes);
                false #(|| value == #name::#variants as #repr)*
            }
        }
    })
}
