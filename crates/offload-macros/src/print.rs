//! `device_print!` and `device_println!`: the template is checked and normalized here, at
//! compile time, so that the device sends only the normalized template and scalar arguments,
//! and the host formats the line (as CUDA's `printf` does).

use offload_format::print_template::{self, ArgRef, Piece};
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::{Expr, Ident, LitStr, Token};

/// The macro's input: a template literal and its arguments, positional then named.
pub(crate) struct PrintInput {
    template: LitStr,
    positional: Vec<Expr>,
    named: Vec<(Ident, Expr)>,
}

impl Parse for PrintInput {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let template: LitStr = input.parse()?;
        let (mut positional, mut named) = (Vec::new(), Vec::<(Ident, Expr)>::new());
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            if input.peek(Ident) && input.peek2(Token![=]) && !input.peek2(Token![==]) {
                let name: Ident = input.parse()?;
                input.parse::<Token![=]>()?;
                let value: Expr = input.parse()?;
                if named.iter().any(|(n, _)| *n == name) {
                    return Err(syn::Error::new(
                        name.span(),
                        format!("device print: argument `{name}` is named twice"),
                    ));
                }
                named.push((name, value));
            } else {
                let value: Expr = input.parse()?;
                if let Some((name, _)) = named.first() {
                    return Err(syn::Error::new_spanned(
                        value,
                        format!(
                            "device print: positional arguments come before named ones (`{name} = …`)"
                        ),
                    ));
                }
                positional.push(value);
            }
        }
        Ok(PrintInput {
            template,
            positional,
            named,
        })
    }
}

/// Expands `device_print!` (`newline` false) or `device_println!` (true).
pub(crate) fn expand(input: PrintInput, newline: bool) -> syn::Result<TokenStream2> {
    let span = input.template.span();
    let written = input.template.value();
    let pieces = print_template::parse(&written)
        .map_err(|e| syn::Error::new(span, format!("device print: bad template: {e}")))?;
    let mut args: Vec<Expr> = input.positional.clone();
    let mut names: Vec<String> = vec![String::new(); args.len()];
    for (name, value) in &input.named {
        args.push(value.clone());
        names.push(name.to_string());
    }
    let mut used = vec![false; args.len()];
    let mut next = 0;
    let mut template = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(text) => template.push_str(&print_template::escape(&text)),
            Piece::Arg { arg, spec } => {
                let index = match arg {
                    ArgRef::Next => {
                        next += 1;
                        next - 1
                    }
                    ArgRef::Index(i) => i,
                    ArgRef::Name(name) => match names.iter().position(|n| *n == name) {
                        Some(i) => i,
                        None => {
                            // A variable of the kernel, captured as `format_args!` does.
                            let ident = Ident::new(&name, span);
                            args.push(syn::parse_quote!(#ident));
                            names.push(name);
                            used.push(false);
                            args.len() - 1
                        }
                    },
                };
                if index >= args.len() {
                    return Err(syn::Error::new(
                        span,
                        format!(
                            "device print: the template refers to argument {index}, but there {}",
                            match input.positional.len() {
                                0 => "are no positional arguments".to_owned(),
                                1 => "is 1 positional argument".to_owned(),
                                n => format!("are {n} positional arguments"),
                            }
                        ),
                    ));
                }
                used[index] = true;
                let spec = spec.to_string();
                if spec.is_empty() {
                    template.push_str(&format!("{{{index}}}"));
                } else {
                    template.push_str(&format!("{{{index}:{spec}}}"));
                }
            }
        }
    }
    if let Some(unused) = used.iter().position(|u| !u) {
        return Err(syn::Error::new_spanned(
            &args[unused],
            "device print: argument never used by the template",
        ));
    }
    if newline {
        template.push('\n');
    }
    let template = LitStr::new(&template, span);
    let temps: Vec<Ident> = (0..args.len())
        .map(|i| format_ident!("__offload_print_arg{i}"))
        .collect();
    Ok(quote! {{
        #( let #temps = &(#args); )*
        // Never runs: makes rustc check the template against the arguments' types, as
        // `format!` would.
        if false {
            let _ = ::core::format_args!(#template, #(#temps),*);
        }
        ::offload_rt::kernel::__private::print(
            #template,
            &[#( ::offload_rt::kernel::__private::print_arg(#temps) ),*],
        );
    }})
}
