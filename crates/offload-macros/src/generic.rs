//! Generic kernels: `#[kernel(T = f32 | f64, BLOCK = 8 | 16)]` on a function generic over
//! types and constants.
//!
//! The device build cannot see which instantiations the host launches (it builds the kernel
//! crate alone), so the attribute lists them, as C++'s explicit instantiations do for a
//! `template __global__` function in another translation unit: each parameter's alternatives,
//! and the kernel is instantiated for every combination. Each instantiation is the kernel
//! written out again, its signature with the arguments in place of the parameters and its body
//! with the parameters declared as items (`type T = f32;`, `const BLOCK: usize = 8;`), then
//! expanded as a kernel of its own, named `axpy__f32` in the images. So its body is checked
//! with the concrete types, as a C++ template's is at its instantiation (a method of the type
//! itself is chosen over a trait's of the same name), and can hold `shared_array!(T, BLOCK)`,
//! whose static could not name an outer function's generic parameters. The host gets one
//! handle, `axpy::<f32>`, a unit variant of a generic enum whose listed instantiations have
//! `launch`; the bounds of the generic signature are checked for each instantiation.

use std::collections::HashMap;

use proc_macro2::{TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Expr, GenericParam, Ident, ItemFn, Token, Type};

/// Instantiations a kernel may list: each is a device entry point of every image, built for
/// every architecture.
const MAX_INSTANCES: usize = 64;

/// A generic kernel and the instantiations its attribute lists.
pub(crate) struct Generic {
    /// The type and const parameters, in declaration order.
    params: Vec<GenericParam>,
    /// One argument per parameter, in `params`' order, for each instantiation.
    instances: Vec<Vec<Arg>>,
}

#[derive(Clone)]
enum Arg {
    Type(Type),
    Const(Expr),
}

impl Arg {
    /// As written, give or take spaces: `f32`, `Complex<f32>`, `16`.
    fn text(&self) -> String {
        let tokens = match self {
            Arg::Type(t) => quote!(#t),
            Arg::Const(e) => quote!(#e),
        };
        let mut text = tokens.to_string();
        for (from, to) in [
            (" :: ", "::"),
            (" <", "<"),
            ("< ", "<"),
            (" >", ">"),
            (" ,", ","),
        ] {
            text = text.replace(from, to);
        }
        text
    }

    fn tokens(&self) -> TokenStream2 {
        match self {
            Arg::Type(t) => quote!(#t),
            Arg::Const(e) => quote!({ #e }),
        }
    }
}

/// `NAME = alt | alt | …`.
struct Binding {
    name: Ident,
    alternatives: Vec<TokenStream2>,
}

impl Parse for Binding {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let mut alternatives = vec![alternative(input)?];
        while input.peek(Token![|]) {
            input.parse::<Token![|]>()?;
            alternatives.push(alternative(input)?);
        }
        Ok(Binding { name, alternatives })
    }
}

/// One alternative's tokens: up to the next top-level `|` or `,` (angle brackets nest).
fn alternative(input: ParseStream) -> syn::Result<TokenStream2> {
    let mut tokens = TokenStream2::new();
    let mut depth = 0usize;
    while !input.is_empty() {
        if depth == 0 && (input.peek(Token![|]) || input.peek(Token![,])) {
            break;
        }
        let tt: TokenTree = input.parse()?;
        if let TokenTree::Punct(p) = &tt {
            match p.as_char() {
                '<' => depth += 1,
                '>' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        tokens.extend([tt]);
    }
    if tokens.is_empty() {
        return Err(input.error("an instantiation's argument is missing"));
    }
    Ok(tokens)
}

/// The name a generic parameter declares.
fn param_ident(param: &GenericParam) -> &Ident {
    match param {
        GenericParam::Type(t) => &t.ident,
        GenericParam::Const(c) => &c.ident,
        GenericParam::Lifetime(l) => &l.lifetime.ident,
    }
}

/// The instantiations of `item` its attribute lists: `None` for a kernel without type or
/// const parameters (whose attribute must be empty).
pub(crate) fn instances(attr: TokenStream2, item: &ItemFn) -> syn::Result<Option<Generic>> {
    let params: Vec<GenericParam> = item
        .sig
        .generics
        .params
        .iter()
        .filter(|p| !matches!(p, GenericParam::Lifetime(_)))
        .cloned()
        .collect();
    if params.is_empty() {
        if !attr.is_empty() {
            return Err(syn::Error::new(
                attr.span(),
                "#[kernel] takes arguments only on a generic kernel: its instantiations, as in \
                 `#[kernel(T = f32 | f64)]`",
            ));
        }
        return Ok(None);
    }
    let example = params
        .iter()
        .map(|p| match p {
            GenericParam::Const(c) => format!("{} = 8 | 16", c.ident),
            _ => format!("{} = f32 | f64", param_ident(p)),
        })
        .collect::<Vec<_>>()
        .join(", ");
    if attr.is_empty() {
        return Err(syn::Error::new(
            item.sig.generics.span(),
            format!(
                "a generic kernel lists its instantiations, as in `#[kernel({example})]`: the \
                 device build compiles each one listed, since it cannot see which the host \
                 launches"
            ),
        ));
    }
    let bindings =
        syn::parse::Parser::parse2(Punctuated::<Binding, Token![,]>::parse_terminated, attr)?;
    let mut choices: Vec<Option<Vec<Arg>>> = vec![None; params.len()];
    for binding in bindings {
        let Some(index) = params.iter().position(|p| *param_ident(p) == binding.name) else {
            return Err(syn::Error::new(
                binding.name.span(),
                format!(
                    "`{}` is not a type or const parameter of the kernel",
                    binding.name
                ),
            ));
        };
        if choices[index].is_some() {
            return Err(syn::Error::new(
                binding.name.span(),
                format!("`{}` is listed twice", binding.name),
            ));
        }
        let args = binding
            .alternatives
            .into_iter()
            .map(|tokens| match &params[index] {
                GenericParam::Const(_) => syn::parse2::<Expr>(tokens).map(Arg::Const),
                _ => syn::parse2::<Type>(tokens).map(Arg::Type),
            })
            .collect::<syn::Result<Vec<_>>>()?;
        choices[index] = Some(args);
    }
    if let Some(missing) = params
        .iter()
        .zip(&choices)
        .find_map(|(p, c)| c.is_none().then(|| param_ident(p).clone()))
    {
        return Err(syn::Error::new(
            missing.span(),
            format!("the kernel's instantiations list no `{missing}`: `#[kernel({example})]`"),
        ));
    }
    let mut instances: Vec<Vec<Arg>> = vec![Vec::new()];
    for args in choices.into_iter().flatten() {
        instances = instances
            .into_iter()
            .flat_map(|prefix| {
                args.iter().map(move |arg| {
                    let mut next = prefix.clone();
                    next.push(arg.clone());
                    next
                })
            })
            .collect();
        if instances.len() > MAX_INSTANCES {
            return Err(syn::Error::new(
                item.sig.ident.span(),
                format!(
                    "more than {MAX_INSTANCES} instantiations: each is an entry point of every \
                     image of every architecture; list fewer"
                ),
            ));
        }
    }
    Ok(Some(Generic { params, instances }))
}

impl Generic {
    /// The generic handle, the bound checks, and each instantiation through `expand_one`
    /// (given the instantiated kernel and its handle type).
    pub(crate) fn expand(
        &self,
        item: ItemFn,
        mut expand_one: impl FnMut(ItemFn) -> syn::Result<TokenStream2>,
    ) -> syn::Result<TokenStream2> {
        let name = &item.sig.ident;
        let vis = &item.vis;
        let enum_name = format_ident!("__offload_generic_{}", name);
        let docs: Vec<_> = item
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("doc"))
            .collect();
        let enum_params = self.declarations();
        let phantom_types: Vec<_> = self.type_params().collect();
        let listed: Vec<String> = self
            .instances
            .iter()
            .map(|args| {
                let args: Vec<String> = args.iter().map(Arg::text).collect();
                format!("`{name}::<{}>`", args.join(", "))
            })
            .collect();
        let handle_doc = format!("Instantiated for {}: each has `launch`.", listed.join(", "));

        // The bounds and `where` clause of the generic signature, checked for each
        // instantiation (its written-out body has no parameters left to bound).
        let generics = &item.sig.generics;
        let (impl_generics, _, where_clause) = generics.split_for_impl();
        let bound_calls = self.instances.iter().map(|args| {
            let args = args.iter().map(Arg::tokens);
            quote_spanned!(name.span()=> __offload_bounds::<#(#args),*>();)
        });

        let instance_trait = format_ident!("__offload_instance_{}", name);
        let unlisted =
            format!("this instantiation of `{name}` is not among those its `#[kernel(..)]` lists");
        let listed_note = format!(
            "`{name}` is instantiated for {}: list the one launched there",
            listed.join(", ")
        );
        let mut out = quote! {
            /// An instantiation of the generic kernel listed in its attribute: the symbol of
            /// its entry point in the device images.
            #[doc(hidden)]
            #[allow(non_camel_case_types)]
            #[diagnostic::on_unimplemented(message = #unlisted, note = #listed_note)]
            #vis trait #instance_trait {
                /// The kernel's name in device images.
                const NAME: &'static str;
            }

            #(#docs)*
            #[doc = ""]
            #[doc = #handle_doc]
            #[doc(hidden)]
            #[allow(non_camel_case_types, dead_code)]
            #vis enum #enum_name<#(#enum_params),*> {
                #name,
                #[doc(hidden)]
                __Never(::core::convert::Infallible, ::core::marker::PhantomData<fn() -> (#(#phantom_types,)*)>),
            }
            #(#docs)*
            #[allow(unused_imports)]
            #vis use #enum_name::#name;

            const _: () = {
                #[allow(dead_code, clippy::extra_unused_type_parameters)]
                fn __offload_bounds #impl_generics () #where_clause {}
                #[allow(dead_code)]
                fn __offload_instances() {
                    #(#bound_calls)*
                }
            };
        };

        let mut symbols = HashMap::new();
        for args in &self.instances {
            let symbol = instance_symbol(name, args);
            if let Some(previous) = symbols.insert(symbol.clone(), args) {
                let text = |args: &[Arg]| args.iter().map(Arg::text).collect::<Vec<_>>().join(", ");
                return Err(syn::Error::new(
                    name.span(),
                    format!(
                        "the instantiations <{}> and <{}> would get one symbol, `{symbol}`",
                        text(previous),
                        text(args)
                    ),
                ));
            }
            let mut instance = item.clone();
            instance.sig.ident = Ident::new(&symbol, name.span());
            instance.sig.generics.params = instance
                .sig
                .generics
                .params
                .into_iter()
                .filter(|p| matches!(p, GenericParam::Lifetime(_)))
                .collect();
            instance.sig.generics.where_clause = None;
            instance.attrs.retain(|a| !a.path().is_ident("doc"));
            Substitute::new(&self.params, args).visit_signature_mut(&mut instance.sig);
            // The body keeps its text: the parameters become items of its own, which the
            // items inside it (`shared_array!`'s static) can name, as they cannot an outer
            // function's generic parameters.
            let aliases = self
                .params
                .iter()
                .zip(args)
                .map(|(param, arg)| match (param, arg) {
                    (GenericParam::Type(p), Arg::Type(t)) => {
                        let ident = &p.ident;
                        quote_spanned!(ident.span()=> #[allow(dead_code)] type #ident = #t;)
                    }
                    (GenericParam::Const(p), Arg::Const(e)) => {
                        let (ident, ty) = (&p.ident, &p.ty);
                        quote_spanned! {ident.span()=>
                            #[allow(dead_code, non_upper_case_globals)]
                            const #ident: #ty = #e;
                        }
                    }
                    _ => TokenStream2::new(),
                });
            let stmts = &instance.block.stmts;
            instance.block = syn::parse_quote!({ #(#aliases)* #(#stmts)* });
            let handle_args = args.iter().map(Arg::tokens);
            out.extend(quote! {
                impl #instance_trait for #enum_name<#(#handle_args),*> {
                    const NAME: &'static str = #symbol;
                }
            });
            out.extend(expand_one(instance)?);
        }
        out.extend(self.launch(&item, &enum_name, &instance_trait)?);
        Ok(out)
    }

    /// The parameters as a generic item declares them again, without bounds: `T`,
    /// `const N: usize`.
    fn declarations(&self) -> impl Iterator<Item = TokenStream2> + '_ {
        self.params.iter().map(|p| match p {
            GenericParam::Const(c) => {
                let (ident, ty) = (&c.ident, &c.ty);
                quote!(const #ident: #ty)
            }
            other => {
                let ident = param_ident(other);
                quote!(#ident)
            }
        })
    }

    /// The type parameters' names.
    fn type_params(&self) -> impl Iterator<Item = &Ident> {
        self.params.iter().filter_map(|p| match p {
            GenericParam::Type(t) => Some(&t.ident),
            _ => None,
        })
    }

    /// The generic handle's `launch`, for the instantiations listed (`Self: Instance`), so
    /// that type arguments the launch's arguments give may be left to inference
    /// (`axpy::<_, 64>`).
    fn launch(
        &self,
        item: &ItemFn,
        enum_name: &Ident,
        instance_trait: &Ident,
    ) -> syn::Result<TokenStream2> {
        let (params, _) = crate::params::read_params(&item.sig)?;
        let (launch_args, launch_safety) = crate::params::launch_parts(&params);
        let generics = self.declarations();
        let param_bounds = self.params.iter().filter_map(|p| match p {
            GenericParam::Type(t) if !t.bounds.is_empty() => {
                let (ident, bounds) = (&t.ident, &t.bounds);
                Some(quote!(#ident: #bounds,))
            }
            _ => None,
        });
        let args = self.params.iter().map(param_ident);
        let device_copy = self
            .type_params()
            .map(|ident| quote!(#ident: ::offload_rt::DeviceCopy,));
        // Lifetime predicates name lifetimes the impl does not declare; the launch needs none.
        let predicates = item
            .sig
            .generics
            .where_clause
            .iter()
            .flat_map(|w| &w.predicates)
            .filter(|p| !matches!(p, syn::WherePredicate::Lifetime(_)));
        Ok(quote! {
            ::offload_rt::__kernel_launch_impl! {
                module #launch_safety,
                @generic [#(#generics),*]
                    [Self: #instance_trait, #(#device_copy)* #(#param_bounds)* #(#predicates,)*]
                #enum_name<#(#args),*>,
                <Self as #instance_trait>::NAME,
                #(#launch_args),*
            }
        })
    }
}

/// `axpy__f32`, `tile__8__f64`: the kernel's name and its arguments' identifier characters,
/// each run of others one `_` (PTX names allow no `<`, `>` or `:`).
fn instance_symbol(name: &Ident, args: &[Arg]) -> String {
    let mut symbol = name.to_string();
    for arg in args {
        let text = arg.text();
        symbol.push_str("__");
        let mut last_underscore = false;
        for c in text.chars() {
            if c.is_ascii_alphanumeric() {
                symbol.push(c);
                last_underscore = false;
            } else if c == '-' {
                symbol.push('m');
                last_underscore = false;
            } else if !last_underscore && !c.is_whitespace() {
                symbol.push('_');
                last_underscore = true;
            }
        }
        while symbol.ends_with('_') && !symbol.ends_with("__") {
            symbol.pop();
        }
    }
    symbol
}

/// Replaces the generic parameters by one instantiation's arguments: in types (`T`,
/// `[f32; N]`), paths (`T::ZERO` becomes `<f32>::ZERO`), expressions (`N`), generic arguments
/// (`foo::<N>`), and macro invocations' and attributes' tokens (`shared_array!(T, N)`,
/// `#[len(N)]`).
struct Substitute {
    types: HashMap<String, Type>,
    consts: HashMap<String, Expr>,
}

impl Substitute {
    fn new(params: &[GenericParam], args: &[Arg]) -> Substitute {
        let mut types = HashMap::new();
        let mut consts = HashMap::new();
        for (param, arg) in params.iter().zip(args) {
            match (param, arg) {
                (GenericParam::Type(p), Arg::Type(t)) => {
                    types.insert(p.ident.to_string(), t.clone());
                }
                (GenericParam::Const(p), Arg::Const(e)) => {
                    consts.insert(p.ident.to_string(), e.clone());
                }
                _ => {}
            }
        }
        Substitute { types, consts }
    }

    /// The parameter a one-segment path without arguments names, if any.
    fn single(path: &syn::Path) -> Option<&Ident> {
        let [segment] = path.segments.iter().collect::<Vec<_>>()[..] else {
            return None;
        };
        (path.leading_colon.is_none() && segment.arguments.is_none()).then_some(&segment.ident)
    }

    fn const_expr(&self, ident: &Ident) -> Option<Expr> {
        let value = self.consts.get(&ident.to_string())?;
        Some(syn::parse_quote_spanned!(ident.span()=> { #value }))
    }

    /// `T::rest` as `<arg>::rest`.
    fn qualify(&self, qself: &mut Option<syn::QSelf>, path: &mut syn::Path) {
        if qself.is_some() || path.leading_colon.is_some() || path.segments.len() < 2 {
            return;
        }
        let first = &path.segments[0];
        if !first.arguments.is_none() {
            return;
        }
        let Some(ty) = self.types.get(&first.ident.to_string()) else {
            return;
        };
        let span = first.ident.span();
        *qself = Some(syn::QSelf {
            lt_token: Token![<](span),
            ty: Box::new(ty.clone()),
            position: 0,
            as_token: None,
            gt_token: Token![>](span),
        });
        path.segments = path.segments.clone().into_iter().skip(1).collect();
        path.leading_colon = Some(Token![::](span));
    }

    fn tokens(&self, tokens: TokenStream2) -> TokenStream2 {
        tokens
            .into_iter()
            .flat_map(|tt| -> Vec<TokenTree> {
                match tt {
                    TokenTree::Ident(ident) => {
                        if let Some(ty) = self.types.get(&ident.to_string()) {
                            quote_spanned!(ident.span()=> #ty).into_iter().collect()
                        } else if let Some(e) = self.consts.get(&ident.to_string()) {
                            quote_spanned!(ident.span()=> { #e }).into_iter().collect()
                        } else {
                            vec![TokenTree::Ident(ident)]
                        }
                    }
                    TokenTree::Group(group) => {
                        let mut new =
                            proc_macro2::Group::new(group.delimiter(), self.tokens(group.stream()));
                        new.set_span(group.span());
                        vec![TokenTree::Group(new)]
                    }
                    other => vec![other],
                }
            })
            .collect()
    }
}

impl VisitMut for Substitute {
    fn visit_type_mut(&mut self, ty: &mut Type) {
        if let Type::Path(p) = ty {
            if p.qself.is_none()
                && let Some(ident) = Self::single(&p.path)
                && let Some(arg) = self.types.get(&ident.to_string())
            {
                *ty = arg.clone();
                return;
            }
            self.qualify(&mut p.qself, &mut p.path);
        }
        syn::visit_mut::visit_type_mut(self, ty);
    }

    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        if let Expr::Path(p) = expr {
            if p.qself.is_none()
                && let Some(ident) = Self::single(&p.path)
                && let Some(value) = self.const_expr(ident)
            {
                *expr = value;
                return;
            }
            self.qualify(&mut p.qself, &mut p.path);
        }
        syn::visit_mut::visit_expr_mut(self, expr);
    }

    fn visit_generic_argument_mut(&mut self, arg: &mut syn::GenericArgument) {
        if let syn::GenericArgument::Type(Type::Path(p)) = arg
            && p.qself.is_none()
            && let Some(ident) = Self::single(&p.path)
            && let Some(value) = self.const_expr(ident)
        {
            *arg = syn::GenericArgument::Const(value);
            return;
        }
        syn::visit_mut::visit_generic_argument_mut(self, arg);
    }

    fn visit_macro_mut(&mut self, mac: &mut syn::Macro) {
        mac.tokens = self.tokens(std::mem::take(&mut mac.tokens));
    }

    fn visit_meta_list_mut(&mut self, list: &mut syn::MetaList) {
        list.tokens = self.tokens(std::mem::take(&mut list.tokens));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_symbols_are_identifiers() {
        let ty = |s: &str| Arg::Type(syn::parse_str(s).unwrap());
        let c = |s: &str| Arg::Const(syn::parse_str(s).unwrap());
        let name = format_ident!("axpy");
        assert_eq!(instance_symbol(&name, &[ty("f32")]), "axpy__f32");
        assert_eq!(
            instance_symbol(&name, &[ty("num::Complex<f32>"), c("16")]),
            "axpy__num_Complex_f32__16"
        );
        assert_eq!(instance_symbol(&name, &[c("-1")]), "axpy__m1");
        assert_eq!(instance_symbol(&name, &[ty("[u8; 4]")]), "axpy___u8_4");
    }

    #[test]
    fn parameters_are_replaced_in_types_paths_expressions_and_macros() {
        let params: Vec<GenericParam> = vec![
            syn::parse_quote!(T: Copy),
            syn::parse_quote!(const N: usize),
        ];
        let args = [
            Arg::Type(syn::parse_quote!(f64)),
            Arg::Const(syn::parse_quote!(8)),
        ];
        let mut item: ItemFn = syn::parse_quote! {
            fn k(x: T, #[len(N)] y: *mut [T; N]) {
                let z: T = T::ZERO + <T as Add>::add(x, x);
                let t = shared_array!(T, N * 2);
                g::<T, N>(N);
            }
        };
        let mut substitute = Substitute::new(&params, &args);
        substitute.visit_item_fn_mut(&mut item);
        let text = quote!(#item).to_string().replace(' ', "");
        for expected in [
            "x:f64",
            "#[len({8})]",
            "*mut[f64;{8}]",
            "letz:f64=<f64>::ZERO+<f64asAdd>::add(x,x)",
            "shared_array!(f64,{8}*2)",
            "g::<f64,{8}>({8})",
        ] {
            assert!(text.contains(expected), "{expected} in {text}");
        }
    }
}
