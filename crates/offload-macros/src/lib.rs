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

mod foreign;
mod generic;
mod kernels;
mod print;
mod regions;

use offload_format::abi;
use offload_format::launch_bounds::MAX_BLOCK_THREADS;
use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, FnArg, ItemFn, Pat, ReturnType, Type};

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
    match take_helpers(item).and_then(|(item, helpers)| expand(attr, item, &helpers)) {
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

enum Kind {
    Scalar,
    /// A tuple of `DeviceCopy` values, passed as a `#[repr(C)]` struct of its elements.
    Tuple,
    Const,
    Mut,
    /// `&[T]`: a read-only slice, passed as address and length.
    Slice,
    /// `DisjointSlice<T>`: a slice each thread writes only its own elements of.
    Disjoint,
    /// `Grid`, a cooperative kernel's first parameter: supplied by the runtime, not by the
    /// caller of `launch`.
    Grid,
}

impl Kind {
    fn is_raw_pointer(&self) -> bool {
        matches!(self, Kind::Const | Kind::Mut)
    }
}

struct Param {
    name: syn::Ident,
    ty: Type,
    /// The pointee for pointers, the element for slices, the type itself for scalars.
    elem: Type,
    kind: Kind,
    /// Declared `mut`.
    mutable: bool,
    /// `#[len(expr)]`: the elements the launch needs, evaluated on the host from the
    /// launch's arguments.
    len: Option<Expr>,
}

const ACCEPTED: &str = "kernel parameters are scalars (u8..u128, i8..i128, usize, isize, \
                        f32, f64, and half::f16, half::bf16 with offload-rt's `half` feature), \
                        #[derive(DeviceCopy)] #[repr(C)] structs, arrays and tuples of these, \
                        read-only slices `&[T]`, `DisjointSlice<T>` to write, or device \
                        pointers (*const T, *mut T)";

/// Whether `ty` names `Grid` (by its last path segment, without arguments); `#[kernel]` checks
/// it is `offload_rt::kernel::Grid`.
fn is_grid(ty: &syn::TypePath) -> bool {
    ty.qself.is_none()
        && ty
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Grid" && s.arguments.is_none())
}

/// The element type of `DisjointSlice<T>` / `DisjointSlice<'_, T>`, by the last path segment.
fn disjoint_elem(ty: &syn::TypePath) -> Option<Type> {
    let last = ty.path.segments.last()?;
    if last.ident != "DisjointSlice" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut types = args.args.iter().filter_map(|a| match a {
        syn::GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    });
    let elem = types.next()?;
    types.next().is_none().then_some(elem)
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
        Type::Reference(r) => match (&*r.elem, r.mutability) {
            (Type::Slice(s), None) => Ok((Kind::Slice, (*s.elem).clone())),
            (Type::Slice(_), Some(m)) => Err(syn::Error::new(
                m.span(),
                format!(
                    "kernel parameter `{name}`: a `&mut [T]` would give every thread the whole \
                     slice to write, and two threads could write one element; take \
                     `DisjointSlice<T>` (each thread gets the elements it owns) or, in an \
                     `unsafe` launch, a `*mut T`"
                ),
            )),
            _ => Err(syn::Error::new(
                r.span(),
                format!(
                    "kernel parameter `{name}`: a reference to one value cannot cross to the \
                     device; pass the value itself (a DeviceCopy type) or a slice. {ACCEPTED}"
                ),
            )),
        },
        Type::Path(p) if is_grid(p) => Ok((Kind::Grid, ty.clone())),
        Type::Path(p) => match disjoint_elem(p) {
            Some(elem) => Ok((Kind::Disjoint, elem)),
            None => Ok((Kind::Scalar, ty.clone())),
        },
        Type::Array(_) => Ok((Kind::Scalar, ty.clone())),
        Type::Tuple(t) if t.elems.is_empty() => Err(syn::Error::new(
            t.span(),
            format!("kernel parameter `{name}`: `()` carries nothing to the device; leave it out"),
        )),
        Type::Tuple(_) => Ok((Kind::Tuple, ty.clone())),
        Type::Paren(p) => classify(name, &p.elem),
        Type::Group(g) => classify(name, &g.elem),
        other => Err(syn::Error::new(
            other.span(),
            format!("kernel parameter `{name}`: {ACCEPTED}"),
        )),
    }
}

/// Takes the `#[len(expr)]` attribute off a parameter.
fn take_len(pt: &mut syn::PatType) -> syn::Result<Option<Expr>> {
    let mut len = None;
    let mut error = None;
    pt.attrs.retain(|a| {
        if !a.path().is_ident("len") {
            return true;
        }
        match a.parse_args::<Expr>() {
            Ok(e) if len.is_none() => len = Some(e),
            Ok(_) => error = Some(syn::Error::new(a.span(), "a second #[len(..)]")),
            Err(e) => {
                error = Some(syn::Error::new(
                    e.span(),
                    format!(
                        "#[len(..)] takes the number of elements the launch needs, an integer \
                         expression of the other parameters: {e}"
                    ),
                ))
            }
        }
        false
    });
    match error {
        Some(e) => Err(e),
        None => Ok(len),
    }
}

/// `ty` with its named lifetimes (but `'static`) elided: the type as code outside the
/// kernel's body, where its lifetime parameters are not declared, writes it.
fn elided_lifetimes(ty: &Type) -> Type {
    struct Elide;
    impl syn::visit_mut::VisitMut for Elide {
        fn visit_lifetime_mut(&mut self, lifetime: &mut syn::Lifetime) {
            if lifetime.ident != "static" {
                *lifetime = syn::Lifetime::new("'_", lifetime.span());
            }
        }
    }
    let mut ty = ty.clone();
    syn::visit_mut::VisitMut::visit_type_mut(&mut Elide, &mut ty);
    ty
}

/// The host's handle of a kernel: a unit struct named like it, or none for an instantiation
/// of a generic kernel, which the generic kernel's handle launches.
enum Handle {
    Unit,
    OfGeneric,
}

fn expand(attr: TokenStream2, item: ItemFn, helpers: &[ItemFn]) -> syn::Result<TokenStream2> {
    let (attr, max_threads) = take_max_threads(attr)?;
    match generic::instances(attr, &item)? {
        None => expand_one(item, Handle::Unit, helpers, max_threads),
        Some(generic) => generic.expand(item, |instance| {
            expand_one(instance, Handle::OfGeneric, helpers, max_threads)
        }),
    }
}

/// Takes `max_threads = N` (CUDA's `__launch_bounds__(N)`) off the attribute's arguments,
/// leaving a generic kernel's instantiations.
fn take_max_threads(attr: TokenStream2) -> syn::Result<(TokenStream2, Option<u32>)> {
    let mut segments: Vec<Vec<TokenTree>> = vec![Vec::new()];
    for token in attr {
        match &token {
            TokenTree::Punct(p) if p.as_char() == ',' => segments.push(Vec::new()),
            _ => segments.last_mut().map_or((), |s| s.push(token)),
        }
    }
    let mut rest = TokenStream2::new();
    let mut max_threads = None;
    for segment in segments.into_iter().filter(|s| !s.is_empty()) {
        let is_bound = matches!(&segment[..], [TokenTree::Ident(i), ..] if i == "max_threads");
        if !is_bound {
            if !rest.is_empty() {
                rest.extend(quote!(,));
            }
            rest.extend(segment);
            continue;
        }
        let span = segment[0].span();
        let value = match &segment[1..] {
            [TokenTree::Punct(eq), TokenTree::Literal(n)] if eq.as_char() == '=' => {
                syn::parse2::<syn::LitInt>(quote!(#n))
                    .and_then(|n| n.base10_parse::<u32>())
                    .ok()
            }
            _ => None,
        };
        match value {
            Some(n @ 1..=MAX_BLOCK_THREADS) if max_threads.is_none() => max_threads = Some(n),
            Some(_) if max_threads.is_some() => {
                return Err(syn::Error::new(span, "a second `max_threads`"));
            }
            _ => {
                return Err(syn::Error::new(
                    span,
                    "`max_threads = N`: the most threads a block of this kernel has, an integer \
                     literal from 1 to 1024 (CUDA's `__launch_bounds__(N)`)",
                ));
            }
        }
    }
    Ok((rest, max_threads))
}

/// The expansion of one kernel (a non-generic one, or one instantiation of a generic one).
/// `helpers` are the functions with barriers of the kernel's `#[kernels]` module, inlined into
/// the CPU device's region form.
fn expand_one(
    item: ItemFn,
    handle: Handle,
    helpers: &[ItemFn],
    max_threads: Option<u32>,
) -> syn::Result<TokenStream2> {
    let sig = &item.sig;
    if let Some(a) = &sig.asyncness {
        return Err(syn::Error::new(a.span(), "a kernel cannot be async"));
    }
    // Lifetimes name the borrows of the launch and stay on the kernel's body; a type or const
    // parameter would make the kernel many device entry points.
    if let Some(param) = sig
        .generics
        .params
        .iter()
        .find(|p| !matches!(p, syn::GenericParam::Lifetime(_)))
    {
        return Err(syn::Error::new(
            param.span(),
            "a kernel cannot be generic over types or constants: each kernel is one device \
             entry point (lifetime parameters are accepted)",
        ));
    }
    if let Some(w) = &sig.generics.where_clause {
        return Err(syn::Error::new(
            w.span(),
            "a kernel takes no `where` clause: each kernel is one device entry point",
        ));
    }
    let generics = &sig.generics;
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new(v.span(), "a kernel cannot be variadic"));
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        let unit = matches!(&**ty, Type::Tuple(t) if t.elems.is_empty());
        if !unit {
            return Err(syn::Error::new(
                ty.span(),
                "a kernel returns nothing: write results through a `DisjointSlice<T>` or `*mut T` parameter",
            ));
        }
    }
    if let Some(abi) = &sig.abi {
        return Err(syn::Error::new(
            abi.span(),
            "write the kernel as a plain Rust `fn`: #[kernel] adds the device ABI",
        ));
    }

    let (params, inputs) = read_params(sig)?;

    let name = &sig.ident;
    let name_str = name.to_string();
    let vis = &item.vis;
    let body_fn = format_ident!("__offload_kernel_{}", name);
    let unsafety = &sig.safety;
    let inputs = &inputs;
    let block = &item.block;
    let (docs, other_attrs): (Vec<_>, Vec<_>) =
        item.attrs.iter().partition(|a| a.path().is_ident("doc"));

    let names: Vec<_> = params.iter().map(|p| &p.name).collect();
    let indices: Vec<_> = (0..params.len()).collect();
    // How each parameter crosses the launch ABI, and its value in the kernel from that.
    let abi_tys: Vec<TokenStream2> = params
        .iter()
        .map(|p| {
            let (ty, elem) = (&p.ty, &p.elem);
            match p.kind {
                Kind::Slice | Kind::Disjoint => quote!(::offload_rt::__private::SliceParam<#elem>),
                Kind::Tuple => quote!(<#elem as ::offload_rt::__private::TupleParam>::Abi),
                _ => quote!(#ty),
            }
        })
        .collect();
    let values: Vec<TokenStream2> = params
        .iter()
        .map(|p| {
            let n = &p.name;
            // SAFETY (of the generated blocks): the host passes a buffer borrowed shared for
            // `&[T]` and exclusively for `DisjointSlice<T>`, alive for the launch.
            match p.kind {
                Kind::Slice => quote!(unsafe { #n.as_slice() }),
                Kind::Disjoint => quote!(unsafe { #n.into_disjoint() }),
                Kind::Tuple => quote!(::offload_rt::__private::TupleParam::from_abi(#n)),
                _ => quote!(#n),
            }
        })
        .collect();
    let read_params = quote! {
        // SAFETY: the runtime passes one pointer per parameter, each at a value of the
        // parameter's launch ABI type.
        #( let #names: #abi_tys = unsafe {
            ::core::ptr::read_unaligned((*params.add(#indices)).cast::<#abi_tys>())
        }; )*
    };
    let gpu_tys: Vec<TokenStream2> = params
        .iter()
        .zip(&abi_tys)
        .map(|(p, abi)| match p.kind {
            Kind::Const | Kind::Mut => quote!(#abi),
            _ => quote!(::offload_rt::__private::GpuParam<#abi>),
        })
        .collect();
    let gpu_args: Vec<TokenStream2> = params
        .iter()
        .zip(&values)
        .map(|(p, value)| {
            let n = &p.name;
            match p.kind {
                Kind::Const | Kind::Mut => quote!(#n),
                _ => quote! {{ let #n = ::offload_rt::__private::gpu_param(#n); #value }},
            }
        })
        .collect();

    // One check function per parameter, named after it, so that a type error names the
    // parameter ("required by a bound in `kernel_parameter_x`").
    // A tuple's elements are checked one by one, each error spanning its element.
    let checks = params.iter().map(|p| {
        let check = format_ident!("kernel_parameter_{}", p.name);
        if matches!(p.kind, Kind::Grid) {
            let ty = &p.ty;
            return quote_spanned! {p.ty.span()=>
                fn #check<T: ::offload_rt::kernel::__private::IsGrid>() {}
                #check::<#ty>();
            };
        }
        let elems: Vec<&Type> = match (&p.kind, &p.elem) {
            (Kind::Tuple, Type::Tuple(t)) => t.elems.iter().collect(),
            _ => vec![&p.elem],
        };
        let uses = elems
            .iter()
            .map(|elem| quote_spanned! {elem.span()=> #check::<#elem>(); });
        quote_spanned! {p.ty.span()=>
            fn #check<T: ::offload_rt::DeviceCopy>() {}
            #(#uses)*
        }
    });

    let (launch_args, launch_safety) = launch_parts(&params);

    // Read and removed by the device link, which gives the kernel the bound as its processor's
    // attribute (NVIDIA's `.maxntid`, AMD's flat work-group size).
    let max_threads_static = max_threads.map(|n| {
        let symbol = offload_format::launch_bounds::symbol(&name_str, n);
        quote! {
            #[unsafe(export_name = #symbol)]
            static __OFFLOAD_MAX_THREADS: u8 = 0;
        }
    });
    let host_handle = match handle {
        Handle::Unit => quote! {
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

            ::offload_rt::__kernel_launch_impl! {
                module #launch_safety, #name, #name_str, #(#launch_args),*
            }
        },
        Handle::OfGeneric => TokenStream2::new(),
    };

    let run_symbol = format!("{}{name_str}", abi::CPU_RUN_PREFIX);
    let thread_symbol = format!("{}{name_str}", abi::CPU_THREAD_PREFIX);

    // The CPU device's form of the barriers: the region entry point and the coroutine path's
    // body with its barriers marked, or the note saying why the kernel keeps coroutines.
    // A `DisjointSlice` is one value for the block, whose accessors give each thread its own
    // elements; other `mut` parameters are per-thread copies.
    let param_muts: Vec<(syn::Ident, bool)> = params
        .iter()
        .map(|p| {
            let copied = p.mutable && !matches!(p.kind, Kind::Disjoint);
            (p.name.clone(), copied)
        })
        .collect();
    let region_values = params.iter().zip(&values).map(|(p, value)| {
        let n = &p.name;
        let ty = elided_lifetimes(&p.ty);
        let mutability = matches!(p.kind, Kind::Disjoint).then(|| quote!(mut));
        quote! { let #mutability #n: #ty = #value; }
    });
    let mut thread_body_fn = body_fn.clone();
    // A cooperative kernel always runs with one coroutine per GPU thread (its blocks wait for
    // each other at `Grid::sync`): no region form, and no note saying why.
    let cooperative = is_cooperative(&params);
    let plan = if cooperative {
        regions::Plan::NoBarriers
    } else {
        // A reference to a parameter lasts across barriers, unless the parameter is a
        // per-thread copy.
        let lasting: Vec<String> = param_muts
            .iter()
            .filter(|(_, copied)| !copied)
            .map(|(name, _)| name.to_string())
            .collect();
        match regions::inline::inline(block, helpers, &lasting) {
            Ok(inlined) => regions::plan(&inlined, &param_muts),
            Err(reason) => regions::Plan::Coroutines(reason),
        }
    };
    let cpu_barriers = match plan {
        regions::Plan::NoBarriers => TokenStream2::new(),
        regions::Plan::Coroutines(reason) => {
            let symbol = format!("{}{name_str}", abi::CPU_NOTE_PREFIX);
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
            let regions_symbol = format!("{}{name_str}", abi::CPU_REGIONS_PREFIX);
            thread_body_fn = format_ident!("__offload_kernel_counted_{}", name);
            quote! {
                // A copy of the body (with the inlined functions of a `#[kernels]` module): the
                // lints ran on the body itself, and comments are not in the copy.
                #[allow(
                    dead_code,
                    unused_unsafe,
                    non_snake_case,
                    clippy::not_unsafe_ptr_arg_deref,
                    clippy::undocumented_unsafe_blocks
                )]
                #(#other_attrs)*
                #[inline(always)]
                #unsafety fn #thread_body_fn #generics (#inputs) #counted

                #[unsafe(export_name = #regions_symbol)]
                #[allow(
                    unused_unsafe,
                    unused_mut,
                    unused_variables,
                    unused_assignments,
                    unused_labels,
                    unreachable_code,
                    clippy::all,
                    clippy::undocumented_unsafe_blocks
                )]
                unsafe extern "C" fn __offload_regions(
                    launch: *const ::offload_rt::__private::CpuLaunch,
                    params: *const *mut ::offload_rt::__private::c_void,
                    begin: u64,
                    end: u64,
                ) -> u32 {
                    #read_params
                    #( #region_values )*
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
        #[allow(dead_code, unused_unsafe, non_snake_case, clippy::not_unsafe_ptr_arg_deref)]
        #(#other_attrs)*
        #[inline(always)]
        #unsafety fn #body_fn #generics (#inputs) #block

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
                #read_params
                // SAFETY: the runtime's launch contract covers running these threads.
                unsafe {
                    ::offload_rt::__private::run_blocks(launch, begin, end, skip, move || {
                        unsafe { #body_fn(#(#values),*) }
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
                #read_params
                // SAFETY: as in `__offload_run`.
                unsafe {
                    ::offload_rt::__private::run_thread(launch, block, thread, move || {
                        unsafe { #thread_body_fn(#(#values),*) }
                    })
                }
            }

            #cpu_barriers
        };
        }
        gpu {
        const _: () = {
            #[unsafe(no_mangle)]
            #[allow(unused_unsafe, non_snake_case, unknown_lints, improper_gpu_kernel_arg)]
            pub unsafe extern "gpu-kernel" fn #name(#(#names: #gpu_tys),*) {
                // SAFETY: the launch's parameters are the kernel's own, by the launch ABI.
                unsafe { #body_fn(#(#gpu_args),*) }
            }
            #max_threads_static
        };
        }
        host {
        #host_handle
        }
        }
    })
}

/// The kernel's parameters as the launch passes them, and its inputs without their
/// `#[len(..)]` attributes.
pub(crate) fn read_params(
    sig: &syn::Signature,
) -> syn::Result<(
    Vec<Param>,
    syn::punctuated::Punctuated<FnArg, syn::Token![,]>,
)> {
    let mut params = Vec::new();
    let mut inputs = sig.inputs.clone();
    for input in inputs.iter_mut() {
        let FnArg::Typed(pt) = input else {
            return Err(syn::Error::new(input.span(), "a kernel has no `self`"));
        };
        let len = take_len(pt)?;
        let Pat::Ident(pi) = &*pt.pat else {
            return Err(syn::Error::new(
                pt.pat.span(),
                "kernel parameters must be plain names",
            ));
        };
        let (kind, elem) = classify(&pi.ident, &pt.ty)?;
        if matches!(kind, Kind::Grid) && !params.is_empty() {
            return Err(syn::Error::new(
                pt.ty.span(),
                format!(
                    "kernel parameter `{}`: a cooperative kernel takes its `Grid` as its first \
                     parameter (the runtime supplies it; the other parameters are the launch's \
                     arguments)",
                    pi.ident
                ),
            ));
        }
        if let (Some(len), Kind::Scalar | Kind::Tuple | Kind::Grid) = (&len, &kind) {
            return Err(syn::Error::new(
                len.span(),
                format!(
                    "kernel parameter `{}`: #[len(..)] is for buffer parameters (slices and \
                     pointers)",
                    pi.ident
                ),
            ));
        }
        params.push(Param {
            name: pi.ident.clone(),
            ty: (*pt.ty).clone(),
            elem,
            kind,
            mutable: pi.mutability.is_some(),
            len,
        });
    }
    Ok((params, inputs))
}

/// Whether the kernel takes a `Grid` (the first parameter, `read_params` checks): a cooperative
/// kernel.
fn is_cooperative(params: &[Param]) -> bool {
    params.first().is_some_and(|p| matches!(p.kind, Kind::Grid))
}

/// The arguments of `__kernel_launch_impl!` for the parameters, and whether the launch is
/// safe (the `unsafe` form carries its safety section).
pub(crate) fn launch_parts(params: &[Param]) -> (Vec<TokenStream2>, TokenStream2) {
    let indices: Vec<_> = (0..params.len()).collect();
    let launch_args = params.iter().zip(&indices).filter_map(|(p, i)| {
        let n = &p.name;
        let elem = &p.elem;
        let kind = match p.kind {
            Kind::Grid => return None,
            Kind::Scalar => quote!(scalar),
            Kind::Tuple => quote!(tuple),
            Kind::Const => quote!(ptr_const),
            Kind::Mut => quote!(ptr_mut),
            Kind::Slice => quote!(slice),
            Kind::Disjoint => quote!(slice_mut),
        };
        let idx = syn::LitInt::new(&i.to_string(), Span::call_site());
        let len = p.len.as_ref().map(|e| {
            let text = e.to_token_stream().to_string();
            quote!(, len = (#e) #text)
        });
        Some(quote! { (#n : #kind #elem, #idx #len) })
    });
    let raw: Vec<String> = params
        .iter()
        .filter(|p| p.kind.is_raw_pointer())
        .map(|p| format!("`{}`", p.name))
        .collect();
    let launch_safety = if raw.is_empty() {
        quote!(safe)
    } else {
        let doc = format!(
            "The kernel takes raw device pointers ({}): the caller guarantees that what it does \
             through them stays inside the buffers passed for them and that no two threads of \
             the launch race on an element (one writing while another reads or writes it \
             without atomics). The launch checks only that each buffer belongs to `device` and \
             the `#[len(..)]` lengths.",
            raw.join(", ")
        );
        quote!(unsafe #doc)
    };
    let cooperative = is_cooperative(params).then(|| quote!(cooperative));
    (launch_args.collect(), quote!(#cooperative #launch_safety))
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
