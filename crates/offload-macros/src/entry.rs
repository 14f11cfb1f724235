//! One `#[kernel]` function's expansion: the signature checked, then the parameters' launch
//! ABI, their compile-time checks, the CPU device's entries (with the region form of a body
//! with barriers, `regions`), the GPU entry and the host handle, each a step of its own.

use offload_format::abi;
use offload_format::launch_bounds::MAX_BLOCK_THREADS;
use proc_macro2::{Span, TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{ItemFn, ReturnType, Type};

use crate::params::{Kind, Param, elided_lifetimes, is_cooperative, launch_parts, read_params};
use crate::{generic, regions};

/// The host's handle of a kernel: a unit struct named like it, or none for an instantiation
/// of a generic kernel, which the generic kernel's handle launches.
enum Handle {
    Unit,
    OfGeneric,
}

pub(crate) fn expand(
    attr: TokenStream2,
    item: ItemFn,
    helpers: &[ItemFn],
) -> syn::Result<TokenStream2> {
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
    check_signature(&item.sig)?;
    let (params, inputs) = read_params(&item.sig)?;
    let kernel = Kernel {
        name: &item.sig.ident,
        name_str: item.sig.ident.to_string(),
        body_fn: format_ident!("__offload_kernel_{}", item.sig.ident),
        unsafety: &item.sig.safety,
        generics: &item.sig.generics,
        inputs: &inputs,
        other_attrs: item
            .attrs
            .iter()
            .filter(|a| !a.path().is_ident("doc"))
            .collect(),
        params: &params,
    };
    let abi = LaunchAbi::of(&params);
    let checks = parameter_checks(&params);
    let max_threads_static = max_threads_static(&kernel.name_str, max_threads);
    let host_handle = host_handle(&kernel, &item, handle);
    let plan = cpu_plan(&item.block, &params, helpers);
    let cpu_barriers = kernel.cpu_barriers(plan, &abi);
    Ok(kernel.entries(
        &item.block,
        &abi,
        &checks,
        cpu_barriers,
        max_threads_static,
        host_handle,
    ))
}

/// The CPU device's items for the barriers of a kernel.
struct CpuBarriers {
    /// The body the source form's thread entry calls: the kernel's own, or its copy with the
    /// barriers of the source-level region form marked.
    thread_body_fn: syn::Ident,
    /// That copy, where there is one.
    marked_body: TokenStream2,
    /// The source-level region form's entry point, where there is one: only an image built
    /// without the IR form carries it (the CPU link forms every kernel's from the body).
    source_regions: TokenStream2,
    /// The note saying why the kernel keeps coroutines: an image built without the IR form
    /// carries it (the CPU link writes its own).
    source_note: TokenStream2,
}

/// The kernel's name and the parts of its signature each entry repeats.
struct Kernel<'a> {
    name: &'a syn::Ident,
    name_str: String,
    /// The private function holding the body, which every entry calls.
    body_fn: syn::Ident,
    unsafety: &'a syn::Safety,
    generics: &'a syn::Generics,
    inputs: &'a syn::punctuated::Punctuated<syn::FnArg, syn::Token![,]>,
    /// The attributes other than its docs, kept on the body's functions.
    other_attrs: Vec<&'a syn::Attribute>,
    params: &'a [Param],
}

/// Refuses what a kernel's signature cannot be: async, generic over types or constants, with a
/// `where` clause, variadic, returning a value, or with an ABI of its own.
fn check_signature(sig: &syn::Signature) -> syn::Result<()> {
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

    Ok(())
}

/// How each parameter crosses the launch ABI, and its value in the kernel from that.
struct LaunchAbi {
    names: Vec<syn::Ident>,
    /// Each parameter's value in the kernel, from its launch ABI value.
    values: Vec<TokenStream2>,
    /// The CPU entries' reads of the parameters from the runtime's pointers.
    read_params: TokenStream2,
    gpu_tys: Vec<TokenStream2>,
    gpu_args: Vec<TokenStream2>,
}

impl LaunchAbi {
    fn of(params: &[Param]) -> LaunchAbi {
        let names: Vec<_> = params.iter().map(|p| &p.name).collect();
        let indices: Vec<_> = (0..params.len()).collect();
        // How each parameter crosses the launch ABI, and its value in the kernel from that.
        let abi_tys: Vec<TokenStream2> = params
            .iter()
            .map(|p| {
                let (ty, elem) = (&p.ty, &p.elem);
                match p.kind {
                    Kind::Slice | Kind::Disjoint => {
                        quote!(::offload_rt::__private::SliceParam<#elem>)
                    }
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

        LaunchAbi {
            names: names.into_iter().cloned().collect(),
            values,
            read_params,
            gpu_tys,
            gpu_args,
        }
    }
}

/// One check function per parameter, named after it, so that a type error names the
/// parameter ("required by a bound in `kernel_parameter_x`").
fn parameter_checks(params: &[Param]) -> Vec<TokenStream2> {
    // A tuple's elements are checked one by one, each error spanning its element.
    params
        .iter()
        .map(|p| {
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
        })
        .collect()
}

/// The static that carries `max_threads` to the device link.
fn max_threads_static(name_str: &str, max_threads: Option<u32>) -> Option<TokenStream2> {
    // Read and removed by the device link, which gives the kernel the bound as its processor's
    // attribute (NVIDIA's `.maxntid`, AMD's flat work-group size).
    max_threads.map(|n| {
        let symbol = offload_format::launch_bounds::symbol(name_str, n);
        quote! {
            #[unsafe(export_name = #symbol)]
            static __OFFLOAD_MAX_THREADS: u8 = 0;
        }
    })
}

/// The host's handle: a unit struct with the kernel's name and `launch` (none for an
/// instantiation of a generic kernel, whose handle is the generic one).
fn host_handle(kernel: &Kernel, item: &ItemFn, handle: Handle) -> TokenStream2 {
    let (name, name_str, vis) = (kernel.name, &kernel.name_str, &item.vis);
    let docs = item.attrs.iter().filter(|a| a.path().is_ident("doc"));
    let (launch_args, launch_safety) = launch_parts(kernel.params);
    match handle {
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
    }
}

/// The CPU device's form of the barriers: the region form, the coroutine path, or no barriers.
fn cpu_plan(block: &syn::Block, params: &[Param], helpers: &[ItemFn]) -> regions::Plan {
    // A `DisjointSlice` is one value for the block, whose accessors give each thread its own
    // elements; other `mut` parameters are per-thread copies.
    let param_muts: Vec<(syn::Ident, bool)> = params
        .iter()
        .map(|p| {
            let copied = p.mutable && !matches!(p.kind, Kind::Disjoint);
            (p.name.clone(), copied)
        })
        .collect();
    // A cooperative kernel always runs with one coroutine per GPU thread (its blocks wait for
    // each other at `Grid::sync`): no region form, and no note saying why.
    let cooperative = is_cooperative(params);
    if cooperative {
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
    }
}

impl Kernel<'_> {
    /// The CPU device's items for `plan` (the region entry point and the coroutine path's body
    /// with its barriers marked, or the note saying why the kernel keeps coroutines), and the
    /// body function the thread entry calls.
    fn cpu_barriers(&self, plan: regions::Plan, abi: &LaunchAbi) -> CpuBarriers {
        let (name, name_str, unsafety, generics, inputs) = (
            self.name,
            &self.name_str,
            self.unsafety,
            self.generics,
            self.inputs,
        );
        let other_attrs = &self.other_attrs;
        let read_params = &abi.read_params;
        let region_values = self.params.iter().zip(&abi.values).map(|(p, value)| {
            let n = &p.name;
            let ty = elided_lifetimes(&p.ty);
            let mutability = matches!(p.kind, Kind::Disjoint).then(|| quote!(mut));
            quote! { let #mutability #n: #ty = #value; }
        });
        let mut thread_body_fn = self.body_fn.clone();
        let mut marked_body = TokenStream2::new();
        let mut source_note = TokenStream2::new();
        let source_regions = match plan {
            regions::Plan::NoBarriers => TokenStream2::new(),
            regions::Plan::Coroutines(reason) => {
                let symbol = format!("{}{name_str}", abi::CPU_NOTE_PREFIX);
                let bytes = syn::LitByteStr::new(reason.as_bytes(), Span::call_site());
                let len = reason.len();
                source_note = quote! {
                    #[unsafe(export_name = #symbol)]
                    #[used]
                    static __OFFLOAD_NOTE: [u8; #len] = *#bytes;
                };
                TokenStream2::new()
            }
            regions::Plan::Regions {
                lanes,
                items,
                block: region_block,
                counted,
            } => {
                let regions_symbol = format!("{}{name_str}", abi::CPU_REGIONS_PREFIX);
                thread_body_fn = format_ident!("__offload_kernel_counted_{}", name);
                marked_body = quote! {
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
                };
                quote! {
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
        CpuBarriers {
            thread_body_fn,
            marked_body,
            source_regions,
            source_note,
        }
    }

    /// Every item of the expansion: the body, the parameter checks, the CPU, GPU and host
    /// entries.
    #[allow(clippy::too_many_arguments)]
    fn entries(
        &self,
        block: &syn::Block,
        abi: &LaunchAbi,
        checks: &[TokenStream2],
        cpu_barriers: CpuBarriers,
        max_threads_static: Option<TokenStream2>,
        host_handle: TokenStream2,
    ) -> TokenStream2 {
        let (name, unsafety, generics, inputs) =
            (self.name, self.unsafety, self.generics, self.inputs);
        let (body_fn, other_attrs) = (&self.body_fn, &self.other_attrs);
        let (read_params, values, names) = (&abi.read_params, &abi.values, &abi.names);
        let (gpu_tys, gpu_args) = (&abi.gpu_tys, &abi.gpu_args);
        let run_symbol = format!("{}{}", abi::CPU_RUN_PREFIX, self.name_str);
        let thread_symbol = format!("{}{}", abi::CPU_THREAD_PREFIX, self.name_str);
        let CpuBarriers {
            thread_body_fn,
            marked_body,
            source_regions,
            source_note,
        } = cpu_barriers;
        // The body the CPU link forms the regions from: a cooperative kernel's blocks wait for
        // each other at `Grid::sync`, so it keeps one coroutine per GPU thread and has none.
        let ir_body = if is_cooperative(self.params) {
            TokenStream2::new()
        } else {
            let body_symbol = format!("{}{}", abi::CPU_BODY_PREFIX, self.name_str);
            quote! {
                #[unsafe(export_name = #body_symbol)]
                #[allow(unused_unsafe)]
                unsafe extern "C" fn __offload_body(
                    params: *const *mut ::offload_rt::__private::c_void,
                ) {
                    #read_params
                    // SAFETY: as in `__offload_run`, for the thread the CPU link's loops run.
                    unsafe { #body_fn(#(#values),*) }
                }
            }
        };
        // The coroutine path's entry: in the source form it runs the copy of the body whose
        // barriers the macro's region form marked, so that the runtime learns whether a thread
        // reached one it did not see.
        let thread_entry = |body: &syn::Ident| {
            quote! {
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
                            unsafe { #body(#(#values),*) }
                        })
                    }
                }
            }
        };
        let (ir_thread, source_thread) = (thread_entry(body_fn), thread_entry(&thread_body_fn));
        quote! {
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

                ::offload_rt::__cpu_barriers! {
                    ir {
                        #ir_thread
                        #ir_body
                    }
                    source {
                        #source_thread
                        #marked_body
                        #source_regions
                        #source_note
                    }
                }
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
        }
    }
}
