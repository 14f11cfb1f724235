//! A kernel's parameters: each one's [`Kind`] (how it crosses the launch ABI) read from its
//! type and `#[len(..)]` attribute, and the arguments of the host handle's `launch`. The
//! kernel attribute, generic kernels and `extern_kernels!` share them.

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, quote};
use syn::spanned::Spanned;
use syn::{Expr, FnArg, Pat, Type};

pub(crate) enum Kind {
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
    pub(crate) fn is_raw_pointer(&self) -> bool {
        matches!(self, Kind::Const | Kind::Mut)
    }
}

pub(crate) struct Param {
    pub(crate) name: syn::Ident,
    pub(crate) ty: Type,
    /// The pointee for pointers, the element for slices, the type itself for scalars.
    pub(crate) elem: Type,
    pub(crate) kind: Kind,
    /// Declared `mut`.
    pub(crate) mutable: bool,
    /// `#[len(expr)]`: the elements the launch needs, evaluated on the host from the
    /// launch's arguments.
    pub(crate) len: Option<Expr>,
}

pub(crate) const ACCEPTED: &str = "kernel parameters are scalars (u8..u128, i8..i128, usize, isize, \
                        f32, f64, and half::f16, half::bf16 with offload-rt's `half` feature), \
                        #[derive(DeviceCopy)] #[repr(C)] structs, arrays and tuples of these, \
                        read-only slices `&[T]`, `DisjointSlice<T>` to write, or device \
                        pointers (*const T, *mut T)";

/// Whether `ty` names `Grid` (by its last path segment, without arguments); `#[kernel]` checks
/// it is `offload_rt::kernel::Grid`.
pub(crate) fn is_grid(ty: &syn::TypePath) -> bool {
    ty.qself.is_none()
        && ty
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Grid" && s.arguments.is_none())
}

/// The element type of `DisjointSlice<T>` / `DisjointSlice<'_, T>`, by the last path segment.
pub(crate) fn disjoint_elem(ty: &syn::TypePath) -> Option<Type> {
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

pub(crate) fn classify(name: &syn::Ident, ty: &Type) -> syn::Result<(Kind, Type)> {
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
pub(crate) fn take_len(pt: &mut syn::PatType) -> syn::Result<Option<Expr>> {
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
pub(crate) fn elided_lifetimes(ty: &Type) -> Type {
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
pub(crate) fn is_cooperative(params: &[Param]) -> bool {
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
