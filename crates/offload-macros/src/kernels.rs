//! `#[kernels]` on a module: hands each `#[kernel]` of the module the module's functions that
//! synchronize, for the CPU device's region form to inline (see `regions::inline`).

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, format_ident};
use syn::{Item, ItemFn};

use crate::regions::inline::{HELPERS_ATTR, synchronizes};

pub(crate) fn expand(attr: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    if !attr.is_empty() {
        return Err(syn::Error::new_spanned(
            attr,
            "#[kernels] takes no arguments",
        ));
    }
    let mut module: syn::ItemMod = syn::parse2(item).map_err(|e| {
        syn::Error::new(
            e.span(),
            "#[kernels] goes on an inline module (`mod name { … }`) of kernels and the functions \
             they call",
        )
    })?;
    let Some((_, items)) = &mut module.content else {
        return Err(syn::Error::new_spanned(
            &module,
            "#[kernels] needs the module's items in place (`mod name { … }`): a module in a \
             file of its own is out of the attribute's sight",
        ));
    };
    let helpers = synchronizing_fns(items);
    if helpers.is_empty() {
        return Ok(module.into_token_stream());
    }
    let names: Vec<String> = helpers.iter().map(|f| f.sig.ident.to_string()).collect();
    let attr_name = format_ident!("{}", HELPERS_ATTR);
    for item in items.iter_mut() {
        let Item::Fn(f) = item else { continue };
        let Some(at) = f.attrs.iter().position(is_kernel_attr) else {
            continue;
        };
        let mut called = HashSet::new();
        crate::regions::idents_of(&f.block.to_token_stream(), &mut called);
        if !names.iter().any(|n| called.contains(n)) {
            continue;
        }
        // After the kernel attribute, which takes it off before it expands anything.
        f.attrs.insert(
            at + 1,
            syn::parse_quote_spanned!(Span::call_site()=> #[#attr_name(#(#helpers)*)]),
        );
    }
    Ok(module.into_token_stream())
}

/// Whether `attr` is a `#[kernel]` attribute (by its last path segment).
fn is_kernel_attr(attr: &syn::Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|s| s.ident == "kernel")
}

/// The module's plain functions (not kernels) that call `sync_threads()` or a warp operation,
/// themselves or through another of them.
fn synchronizing_fns(items: &[Item]) -> Vec<ItemFn> {
    let plain: Vec<&ItemFn> = items
        .iter()
        .filter_map(|i| match i {
            Item::Fn(f) if !f.attrs.iter().any(is_kernel_attr) => Some(f),
            _ => None,
        })
        .collect();
    let names: Vec<HashSet<String>> = plain
        .iter()
        .map(|f| {
            let mut idents = HashSet::new();
            crate::regions::idents_of(&f.block.to_token_stream(), &mut idents);
            idents
        })
        .collect();
    let mut synced: Vec<bool> = plain
        .iter()
        .map(|f| synchronizes(&f.block.to_token_stream()))
        .collect();
    // Until no function is added: one that names a synchronizing one synchronizes.
    loop {
        let known: Vec<String> = plain
            .iter()
            .zip(&synced)
            .filter(|(_, s)| **s)
            .map(|(f, _)| f.sig.ident.to_string())
            .collect();
        let mut added = false;
        for (i, idents) in names.iter().enumerate() {
            if !synced[i] && known.iter().any(|k| idents.contains(k)) {
                synced[i] = true;
                added = true;
            }
        }
        if !added {
            break;
        }
    }
    plain
        .into_iter()
        .zip(synced)
        .filter(|(_, s)| *s)
        .map(|(f, _)| f.clone())
        .collect()
}
