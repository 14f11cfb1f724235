//! `extern_kernels!`: typed launch handles for kernels not written in Rust (CUDA, HIP), which
//! the runtime finds by their symbol names in the images the device loads.

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, FnArg, ForeignItemFn, Pat, ReturnType, Type};

/// The macro's input: foreign function declarations, each ending in `;`.
pub(crate) struct Declarations(Vec<ForeignItemFn>);

impl Parse for Declarations {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut items = Vec::new();
        while !input.is_empty() {
            items.push(input.parse()?);
        }
        Ok(Declarations(items))
    }
}

enum Kind {
    Scalar,
    Const,
    Mut,
}

struct Param {
    name: syn::Ident,
    /// The pointee for pointers, the type itself for scalars.
    elem: Type,
    span: Span,
    kind: Kind,
    len: Option<Expr>,
}

const ACCEPTED: &str = "foreign kernel parameters are device pointers (`*const T`, `*mut T`) \
                        and values passed by value: scalars (u8..u64, i8..i64, usize, isize, \
                        f32, f64) and #[derive(DeviceCopy)] #[repr(C)] structs";

fn error(span: Span, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, message)
}

fn classify(name: &syn::Ident, ty: &Type) -> syn::Result<(Kind, Type)> {
    let rust_only = |span: Span, what: &str| {
        error(
            span,
            format!(
                "foreign kernel parameter `{name}`: {what} is for Rust kernels (`#[kernel]`), \
                 which receive it as an address and a length; a CUDA or HIP kernel takes a \
                 pointer: declare `*const T` or `*mut T`"
            ),
        )
    };
    match ty {
        Type::Ptr(p) => {
            let kind = match p.mutability {
                syn::PointerMutability::Mut(_) => Kind::Mut,
                syn::PointerMutability::Const(_) => Kind::Const,
            };
            Ok((kind, (*p.elem).clone()))
        }
        Type::Reference(r) if matches!(&*r.elem, Type::Slice(_)) => {
            Err(rust_only(r.span(), "a slice"))
        }
        Type::Reference(r) => Err(error(
            r.span(),
            format!(
                "foreign kernel parameter `{name}`: a reference cannot cross to the device; \
                 {ACCEPTED}"
            ),
        )),
        Type::Path(p) if crate::params::disjoint_elem(p).is_some() => {
            Err(rust_only(p.span(), "`DisjointSlice`"))
        }
        Type::Path(_) => Ok((Kind::Scalar, ty.clone())),
        Type::Array(a) => Err(error(
            a.span(),
            format!(
                "foreign kernel parameter `{name}`: a C or C++ kernel cannot take an array by \
                 value (an array parameter is a pointer): declare `*const T` / `*mut T`, or a \
                 #[repr(C)] struct holding the array"
            ),
        )),
        Type::Tuple(t) if !t.elems.is_empty() => Err(error(
            t.span(),
            format!(
                "foreign kernel parameter `{name}`: C and C++ kernels take no tuples; declare \
                 the #[repr(C)] struct of the same fields that the kernel's C signature takes"
            ),
        )),
        Type::Paren(p) => classify(name, &p.elem),
        Type::Group(g) => classify(name, &g.elem),
        other => Err(error(
            other.span(),
            format!("foreign kernel parameter `{name}`: {ACCEPTED}"),
        )),
    }
}

/// The symbol `#[link_name = "..."]` gives, checked to be one `offload.kernels` can list.
fn link_name(attr: &Attribute) -> syn::Result<String> {
    let usage = "write `#[link_name = \"symbol\"]` with the kernel's symbol name (a C++ kernel's \
                 mangled name, `_Z9scale_cppPffi`)";
    let syn::Meta::NameValue(nv) = &attr.meta else {
        return Err(error(attr.span(), usage));
    };
    let Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(s),
        ..
    }) = &nv.value
    else {
        return Err(error(nv.value.span(), usage));
    };
    let symbol = s.value();
    if symbol.is_empty()
        || symbol
            .chars()
            .any(|c| matches!(c, ',' | ';' | ':' | '\0') || c.is_whitespace())
    {
        return Err(error(
            s.span(),
            format!(
                "`{symbol}` cannot be a kernel's symbol name: symbols are not empty and hold no \
                 `,`, `;`, `:`, NUL or whitespace"
            ),
        ));
    }
    Ok(symbol)
}

fn expand_one(item: ForeignItemFn) -> syn::Result<TokenStream2> {
    let sig = &item.sig;
    let name = &sig.ident;
    let mut docs = Vec::new();
    let mut cfgs = Vec::new();
    let mut symbol = None;
    for attr in &item.attrs {
        let path = attr.path();
        if path.is_ident("doc") {
            docs.push(attr);
        } else if path.is_ident("cfg") {
            cfgs.push(attr);
        } else if path.is_ident("link_name") {
            if symbol.is_some() {
                return Err(error(attr.span(), "a second #[link_name]"));
            }
            symbol = Some(link_name(attr)?);
        } else {
            return Err(error(
                attr.span(),
                "a foreign kernel declaration takes doc comments, #[cfg(..)] and \
                 #[link_name = \"symbol\"]",
            ));
        }
    }
    if let Some(c) = &sig.constness {
        return Err(error(c.span(), "a kernel cannot be `const`"));
    }
    if let Some(a) = &sig.asyncness {
        return Err(error(a.span(), "a kernel cannot be async"));
    }
    match &sig.safety {
        syn::Safety::Default => {}
        other => {
            return Err(error(
                other.span(),
                "write `fn`: the launch of every foreign kernel is `unsafe`, since Rust does \
                 not check what it does",
            ));
        }
    }
    if let Some(abi) = &sig.abi {
        return Err(error(
            abi.span(),
            "write `fn`: the declaration gives the kernel's parameters, and the launch passes \
             them as the device's launch ABI wants",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(error(
            sig.generics.span(),
            "a foreign kernel cannot be generic: declare each instantiation with its mangled \
             name in #[link_name]",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(error(v.span(), "a kernel cannot be variadic"));
    }
    if let ReturnType::Type(_, ty) = &sig.output
        && !matches!(&**ty, Type::Tuple(t) if t.elems.is_empty())
    {
        return Err(error(ty.span(), "a kernel returns nothing"));
    }

    let mut params = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(pt) = input else {
            return Err(error(input.span(), "a kernel has no `self`"));
        };
        let mut pt = pt.clone();
        let len = crate::params::take_len(&mut pt)?;
        if let Some(other) = pt.attrs.first() {
            return Err(error(
                other.span(),
                "a foreign kernel parameter takes only #[len(..)]",
            ));
        }
        let Pat::Ident(pi) = &*pt.pat else {
            return Err(error(
                pt.pat.span(),
                "kernel parameters must be plain names",
            ));
        };
        if pi.by_ref.is_some() || pi.mutability.is_some() || pi.subpat.is_some() {
            return Err(error(pi.span(), "kernel parameters must be plain names"));
        }
        let (kind, elem) = classify(&pi.ident, &pt.ty)?;
        if let (Some(len), Kind::Scalar) = (&len, &kind) {
            return Err(error(
                len.span(),
                format!(
                    "foreign kernel parameter `{}`: #[len(..)] is for pointer parameters",
                    pi.ident
                ),
            ));
        }
        params.push(Param {
            name: pi.ident.clone(),
            elem,
            span: pt.ty.span(),
            kind,
            len,
        });
    }

    let symbol = symbol.unwrap_or_else(|| name.to_string());
    let vis = &item.vis;
    let checks = params.iter().map(|p| {
        let elem = &p.elem;
        let check = format_ident!("kernel_parameter_{}", p.name);
        quote_spanned! {p.span=>
            fn #check<T: ::offload_rt::DeviceCopy>() {}
            #check::<#elem>();
        }
    });
    let launch_args = params.iter().enumerate().map(|(i, p)| {
        let n = &p.name;
        let elem = &p.elem;
        let kind = match p.kind {
            Kind::Scalar => quote!(scalar),
            Kind::Const => quote!(ptr_const),
            Kind::Mut => quote!(ptr_mut),
        };
        let idx = syn::LitInt::new(&i.to_string(), Span::call_site());
        let len = p.len.as_ref().map(|e| {
            let text = e.to_token_stream().to_string();
            quote!(, len = (#e) #text)
        });
        quote! { (#n : #kind #elem, #idx #len) }
    });
    let pointers: Vec<String> = params
        .iter()
        .filter(|p| !matches!(p.kind, Kind::Scalar))
        .map(|p| format!("`{}`", p.name))
        .collect();
    let through = if pointers.is_empty() {
        String::new()
    } else {
        format!(" (through {})", pointers.join(", "))
    };
    let safety = format!(
        "`{symbol}` is foreign code, which Rust does not check: the caller guarantees that \
         this declaration gives the kernel's parameter types (the launch checks only their \
         count and sizes, and only where the image records them), that the memory the kernel \
         accesses{through} lies inside the buffers passed for it, and that no two threads of \
         the launch race on an element. The launch checks that each buffer belongs to \
         `device`, and the `#[len(..)]` lengths."
    );
    let about = format!(
        "Foreign kernel `{symbol}`, found by its symbol name in the images the device loads."
    );
    Ok(quote! {
        #(#cfgs)*
        #(#docs)*
        #[doc = ""]
        #[doc = #about]
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #name;

        #(#cfgs)*
        impl #name {
            /// The kernel's symbol name in device images.
            pub const NAME: &'static str = #symbol;
        }

        #(#cfgs)*
        const _: () = {
            #[allow(dead_code, non_snake_case)]
            fn __offload_checks() {
                #(#checks)*
            }
        };

        #(#cfgs)*
        ::offload_rt::__kernel_launch_impl! {
            foreign unsafe #safety, #name, #symbol, #(#launch_args),*
        }
    })
}

pub(crate) fn expand(declarations: Declarations) -> syn::Result<TokenStream2> {
    let mut out = TokenStream2::new();
    let mut errors: Option<syn::Error> = None;
    for item in declarations.0 {
        match expand_one(item) {
            Ok(tokens) => out.extend(tokens),
            Err(e) => match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            },
        }
    }
    if let Some(e) = errors {
        return Err(e);
    }
    Ok(quote! {
        ::offload_rt::__for_target! {
            cpu {}
            gpu {}
            host { #out }
        }
    })
}
