//! `#[kernel]`: marks a function of a kernel crate as a kernel.
//!
//! ```ignore
//! #[offload_rt::kernel]
//! pub fn saxpy(n: u32, a: f32, x: *const f32, y: *mut f32) { /* device code */ }
//! ```
//!
//! Parameters are passed by value when they are `DeviceCopy`: scalars (`u8`..`u64`,
//! `i8`..`i64`, `usize`, `isize`, `f32`, `f64`; `half::f16` and `half::bf16` with offload-rt's
//! `half` feature), `#[derive(DeviceCopy)] #[repr(C)]` structs and
//! arrays of these; and device pointers `*const T` / `*mut T`. The attribute emits:
//!
//! - always, the body as a private function (so kernel code type-checks with the host build);
//! - in device builds (`--cfg offload_device`, evaluated inside offload-rt so kernel crates
//!   need not declare it), the device entry points for the target being built: on the
//!   CPU device `__offload_cpu_run_<name>` (a range of blocks, the thread loop with the body
//!   inlined) and `__offload_cpu_thread_<name>` (one thread, for barriers); on GPUs an
//!   `extern "gpu-kernel"` function named `<name>` taking the parameters themselves;
//! - otherwise, a host handle: a unit struct named like the kernel whose `launch` takes the
//!   device, a `LaunchConfig` and one argument per parameter: scalars by value, `*const T` as
//!   `&DeviceBuffer<T>`, `*mut T` as `&mut DeviceBuffer<T>`, so argument types are checked at
//!   compile time.

mod regions;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat, ReturnType, Type};

/// See the crate documentation.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = TokenStream2::from(attr);
    let item = syn::parse_macro_input!(item as ItemFn);
    match expand(attr, item) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

enum Kind {
    Scalar,
    Const,
    Mut,
}

struct Param {
    name: syn::Ident,
    ty: Type,
    /// The pointee for pointers, the type itself for scalars.
    elem: Type,
    kind: Kind,
}

fn classify(name: &syn::Ident, ty: &Type) -> syn::Result<(Kind, Type)> {
    match ty {
        Type::Ptr(p) => {
            let kind = if matches!(p.mutability, syn::PointerMutability::Mut(_)) {
                Kind::Mut
            } else {
                Kind::Const
            };
            Ok((kind, (*p.elem).clone()))
        }
        Type::Path(_) | Type::Array(_) => Ok((Kind::Scalar, ty.clone())),
        Type::Paren(p) => classify(name, &p.elem),
        Type::Group(g) => classify(name, &g.elem),
        other => Err(syn::Error::new(
            other.span(),
            format!(
                "kernel parameter `{name}`: kernel parameters are scalars (u8..u64, i8..i64, \
                 usize, isize, f32, f64, and half::f16, half::bf16 with offload-rt's `half` \
                 feature), #[derive(DeviceCopy)] #[repr(C)] structs, arrays of these, or device \
                 pointers (*const T, *mut T)"
            ),
        )),
    }
}

fn expand(attr: TokenStream2, item: ItemFn) -> syn::Result<TokenStream2> {
    if !attr.is_empty() {
        return Err(syn::Error::new(attr.span(), "#[kernel] takes no arguments"));
    }
    let sig = &item.sig;
    if let Some(a) = &sig.asyncness {
        return Err(syn::Error::new(a.span(), "a kernel cannot be async"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "a kernel cannot be generic: each kernel is one device entry point",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new(v.span(), "a kernel cannot be variadic"));
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        let unit = matches!(&**ty, Type::Tuple(t) if t.elems.is_empty());
        if !unit {
            return Err(syn::Error::new(
                ty.span(),
                "a kernel returns nothing: write results through a `*mut T` parameter",
            ));
        }
    }
    if let Some(abi) = &sig.abi {
        return Err(syn::Error::new(
            abi.span(),
            "write the kernel as a plain Rust `fn`: #[kernel] adds the device ABI",
        ));
    }

    let mut params = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(pt) = input else {
            return Err(syn::Error::new(input.span(), "a kernel has no `self`"));
        };
        let Pat::Ident(pi) = &*pt.pat else {
            return Err(syn::Error::new(
                pt.pat.span(),
                "kernel parameters must be plain names",
            ));
        };
        let (kind, elem) = classify(&pi.ident, &pt.ty)?;
        params.push(Param {
            name: pi.ident.clone(),
            ty: (*pt.ty).clone(),
            elem,
            kind,
        });
    }

    let name = &sig.ident;
    let name_str = name.to_string();
    let vis = &item.vis;
    let body_fn = format_ident!("__offload_kernel_{}", name);
    let unsafety = &sig.safety;
    let inputs = &sig.inputs;
    let block = &item.block;
    let (docs, other_attrs): (Vec<_>, Vec<_>) =
        item.attrs.iter().partition(|a| a.path().is_ident("doc"));

    let names: Vec<_> = params.iter().map(|p| &p.name).collect();
    let tys: Vec<_> = params.iter().map(|p| &p.ty).collect();
    let indices: Vec<_> = (0..params.len()).collect();
    let gpu_tys: Vec<TokenStream2> = params
        .iter()
        .map(|p| {
            let ty = &p.ty;
            match p.kind {
                Kind::Scalar => quote!(::offload_rt::__private::GpuParam<#ty>),
                Kind::Const | Kind::Mut => quote!(#ty),
            }
        })
        .collect();
    let gpu_args: Vec<TokenStream2> = params
        .iter()
        .map(|p| {
            let n = &p.name;
            match p.kind {
                Kind::Scalar => quote!(::offload_rt::__private::gpu_param(#n)),
                Kind::Const | Kind::Mut => quote!(#n),
            }
        })
        .collect();

    // One check function per parameter, named after it, so that a type error names the
    // parameter ("required by a bound in `kernel_parameter_x`").
    let checks = params.iter().map(|p| {
        let elem = &p.elem;
        let check = format_ident!("kernel_parameter_{}", p.name);
        quote_spanned! {p.ty.span()=>
            fn #check<T: ::offload_rt::DeviceCopy>() {}
            #check::<#elem>();
        }
    });

    let launch_args = params.iter().zip(&indices).map(|(p, i)| {
        let n = &p.name;
        let elem = &p.elem;
        let kind = match p.kind {
            Kind::Scalar => quote!(scalar),
            Kind::Const => quote!(ptr_const),
            Kind::Mut => quote!(ptr_mut),
        };
        let idx = syn::LitInt::new(&i.to_string(), Span::call_site());
        quote! { (#n : #kind #elem, #idx) }
    });

    let run_symbol = format!("__offload_cpu_run_{name_str}");
    let thread_symbol = format!("__offload_cpu_thread_{name_str}");

    // The CPU device's form of the barriers: the region entry point and the coroutine path's
    // body with its barriers marked, or the note saying why the kernel keeps coroutines.
    let param_muts: Vec<(syn::Ident, bool)> = sig
        .inputs
        .iter()
        .filter_map(|input| match input {
            FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(pi) => Some((pi.ident.clone(), pi.mutability.is_some())),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    let mut thread_body_fn = body_fn.clone();
    let cpu_barriers = match regions::plan(block, &param_muts) {
        regions::Plan::NoBarriers => TokenStream2::new(),
        regions::Plan::Coroutines(reason) => {
            let symbol = format!("__offload_cpu_note_{name_str}");
            let bytes = syn::LitByteStr::new(reason.as_bytes(), Span::call_site());
            let len = reason.len();
            quote! {
                #[unsafe(export_name = #symbol)]
                #[used]
                static __OFFLOAD_NOTE: [u8; #len] = *#bytes;
            }
        }
        regions::Plan::Regions {
            lanes,
            items,
            block: region_block,
            counted,
        } => {
            let regions_symbol = format!("__offload_cpu_regions_{name_str}");
            thread_body_fn = format_ident!("__offload_kernel_counted_{}", name);
            quote! {
                #[allow(dead_code, unused_unsafe, clippy::not_unsafe_ptr_arg_deref)]
                #(#other_attrs)*
                #[inline(always)]
                #unsafety fn #thread_body_fn(#inputs) #counted

                #[unsafe(export_name = #regions_symbol)]
                #[allow(
                    unused_unsafe,
                    unused_mut,
                    unused_variables,
                    unused_assignments,
                    unused_labels,
                    unreachable_code,
                    clippy::all
                )]
                unsafe extern "C" fn __offload_regions(
                    launch: *const ::offload_rt::__private::CpuLaunch,
                    params: *const *mut ::offload_rt::__private::c_void,
                    begin: u64,
                    end: u64,
                ) -> u32 {
                    // SAFETY: as in `__offload_run`.
                    #( let #names: #tys = unsafe {
                        ::core::ptr::read_unaligned((*params.add(#indices)).cast::<#tys>())
                    }; )*
                    #items
                    // SAFETY: the runtime passes its launch record, alive for the launch.
                    unsafe { ::offload_rt::__private::enter_regions(launch) };
                    let mut __offload_cursor = 0usize;
                    #lanes
                    if !::offload_rt::__private::lanes_fit(__offload_cursor) {
                        return 1;
                    }
                    let mut __offload_block = begin;
                    while __offload_block < end {
                        // SAFETY: the runtime's launch contract covers these blocks.
                        unsafe {
                            ::offload_rt::__private::begin_region_block(launch, __offload_block)
                        };
                        #region_block
                        __offload_block += 1;
                    }
                    0
                }
            }
        }
    };

    Ok(quote! {
        #[doc(hidden)]
        #[allow(dead_code, unused_unsafe, clippy::not_unsafe_ptr_arg_deref)]
        #(#other_attrs)*
        #[inline(always)]
        #unsafety fn #body_fn(#inputs) #block

        const _: () = {
            #[allow(dead_code, non_snake_case)]
            fn __offload_checks() {
                #(#checks)*
            }
        };

        ::offload_rt::__for_target! {
        cpu {
        const _: () = {
            #[unsafe(export_name = #run_symbol)]
            #[allow(unused_unsafe)]
            unsafe extern "C" fn __offload_run(
                launch: *const ::offload_rt::__private::CpuLaunch,
                params: *const *mut ::offload_rt::__private::c_void,
                begin: u64,
                end: u64,
                skip: u32,
            ) {
                // SAFETY: the runtime passes one pointer per parameter, each at a value of the
                // parameter's type (the launch ABI).
                #( let #names: #tys = unsafe {
                    ::core::ptr::read_unaligned((*params.add(#indices)).cast::<#tys>())
                }; )*
                // SAFETY: the runtime's launch contract covers running these threads.
                unsafe {
                    ::offload_rt::__private::run_blocks(launch, begin, end, skip, move || {
                        unsafe { #body_fn(#(#names),*) }
                    })
                }
            }

            #[unsafe(export_name = #thread_symbol)]
            #[allow(unused_unsafe)]
            unsafe extern "C" fn __offload_thread(
                launch: *const ::offload_rt::__private::CpuLaunch,
                params: *const *mut ::offload_rt::__private::c_void,
                block: u64,
                thread: u32,
            ) {
                // SAFETY: as in `__offload_run`.
                #( let #names: #tys = unsafe {
                    ::core::ptr::read_unaligned((*params.add(#indices)).cast::<#tys>())
                }; )*
                // SAFETY: as in `__offload_run`.
                unsafe {
                    ::offload_rt::__private::run_thread(launch, block, thread, move || {
                        unsafe { #thread_body_fn(#(#names),*) }
                    })
                }
            }

            #cpu_barriers
        };
        }
        gpu {
        const _: () = {
            #[unsafe(no_mangle)]
            #[allow(unused_unsafe, unknown_lints, improper_gpu_kernel_arg)]
            pub unsafe extern "gpu-kernel" fn #name(#(#names: #gpu_tys),*) {
                // SAFETY: the launch's parameters are the kernel's own, by the launch ABI.
                unsafe { #body_fn(#(#gpu_args),*) }
            }
        };
        }
        host {
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #name;

        impl #name {
            /// The kernel's name in device images.
            pub const NAME: &'static str = #name_str;
            /// The kernel module (this crate's library name) whose images hold the kernel.
            pub const MODULE: &'static str = env!("CARGO_CRATE_NAME");
        }

        ::offload_rt::__kernel_launch_impl! { #name, #name_str, #(#launch_args),* }
        }
        }
    })
}

/// `#[derive(DeviceCopy)]`: implements `offload_rt::DeviceCopy` for a `#[repr(C)]` struct
/// whose fields are all `DeviceCopy`, checking at compile time that it has no padding (device
/// code and the host copy it bytewise, and every bit pattern of its fields is a valid value).
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
    let syn::Data::Struct(data) = &item.data else {
        return Err(syn::Error::new(
            name.span(),
            "#[derive(DeviceCopy)] is for structs: an enum or union can hold invalid bit patterns",
        ));
    };
    if !item.generics.params.is_empty() {
        return Err(syn::Error::new(
            item.generics.span(),
            "#[derive(DeviceCopy)] does not take generic structs",
        ));
    }
    let mut repr_c = false;
    for attr in item.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") || meta.path.is_ident("transparent") {
                repr_c = true;
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
    let checks = fields.iter().enumerate().map(|(i, f)| {
        let ty = &f.ty;
        let check = match &f.ident {
            Some(id) => format_ident!("field_{}", id),
            None => format_ident!("field_{}", i),
        };
        quote_spanned! {ty.span()=>
            fn #check<T: ::offload_rt::DeviceCopy>() {}
            #check::<#ty>();
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
    Ok(quote! {
        const _: () = {
            #[allow(dead_code, non_snake_case)]
            fn __offload_fields() {
                #(#checks)*
            }
            assert!(
                ::core::mem::size_of::<#name>() == 0 #(+ #sizes)*,
                #message
            );
        };
        // SAFETY: a `#[repr(C)]` struct without padding (asserted above) whose fields are all
        // `DeviceCopy` (checked above) has no pointers into host memory, no padding, and every
        // bit pattern is a valid value.
        unsafe impl ::offload_rt::DeviceCopy for #name {}
    })
}
