//! `#[kernel]`: marks a function of a kernel crate as a kernel.
//!
//! ```ignore
//! #[offload_rt::kernel]
//! pub fn saxpy(n: u32, a: f32, x: *const f32, y: *mut f32) { /* device code */ }
//! ```
//!
//! Parameters are scalars (`u8`..`u64`, `i8`..`i64`, `usize`, `isize`, `f32`, `f64`) and
//! device pointers `*const T` / `*mut T`. The attribute emits:
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

fn classify(ty: &Type) -> syn::Result<(Kind, Type)> {
    match ty {
        Type::Ptr(p) => {
            let kind = if p.mutability.is_some() {
                Kind::Mut
            } else {
                Kind::Const
            };
            Ok((kind, (*p.elem).clone()))
        }
        Type::Path(_) => Ok((Kind::Scalar, ty.clone())),
        Type::Paren(p) => classify(&p.elem),
        Type::Group(g) => classify(&g.elem),
        other => Err(syn::Error::new(
            other.span(),
            "kernel parameters are scalars (u8..u64, i8..i64, usize, isize, f32, f64) or device pointers (*const T, *mut T)",
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
        let (kind, elem) = classify(&pt.ty)?;
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
    let unsafety = &sig.unsafety;
    let inputs = &sig.inputs;
    let block = &item.block;
    let (docs, other_attrs): (Vec<_>, Vec<_>) =
        item.attrs.iter().partition(|a| a.path().is_ident("doc"));

    let names: Vec<_> = params.iter().map(|p| &p.name).collect();
    let tys: Vec<_> = params.iter().map(|p| &p.ty).collect();
    let indices: Vec<_> = (0..params.len()).collect();

    let checks = params.iter().map(|p| {
        let elem = &p.elem;
        match p.kind {
            Kind::Scalar => quote_spanned! {p.ty.span()=>
                __offload_check_scalar::<#elem>();
            },
            Kind::Const | Kind::Mut => quote_spanned! {p.ty.span()=>
                __offload_check_pointee::<#elem>();
            },
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

    Ok(quote! {
        #[doc(hidden)]
        #[allow(dead_code, unused_unsafe, clippy::not_unsafe_ptr_arg_deref)]
        #(#other_attrs)*
        #[inline(always)]
        #unsafety fn #body_fn(#inputs) #block

        const _: () = {
            fn __offload_check_scalar<T: ::offload_rt::KernelScalar>() {}
            fn __offload_check_pointee<T: ::offload_rt::DeviceCopy>() {}
            #[allow(dead_code)]
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
                        unsafe { #body_fn(#(#names),*) }
                    })
                }
            }
        };
        }
        gpu {
        const _: () = {
            #[unsafe(no_mangle)]
            #[allow(unused_unsafe)]
            pub unsafe extern "gpu-kernel" fn #name(#(#names: #tys),*) {
                // SAFETY: the launch's parameters are the kernel's own, by the launch ABI.
                unsafe { #body_fn(#(#names),*) }
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
