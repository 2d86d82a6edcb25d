//! `#[kernel]`: rust-cuda's attribute, for stock rustc.
//!
//! On nvptx64 the function becomes an `extern "ptx-kernel"` function, which rustc emits as a PTX `.entry`
//! (`extern "C"` would be a plain `.func` that cannot be launched). On the host it stays an `extern "C"` function
//! without `#[no_mangle]` (several instances of one kernel share the host library), and a `<name>__HOST`
//! descriptor lets the host emulator launch it from type-erased arguments.

use proc_macro::TokenStream;
use quote::{format_ident, quote, ToTokens};
use syn::{parse_macro_input, spanned::Spanned, Abi, FnArg, Ident, ItemFn, LitStr, Pat, ReturnType};

/// The host descriptor `#[kernel]` emits for the entry point `name`, with `name`'s span.
fn host_static_name(name: &Ident) -> Ident {
    format_ident!("{}__HOST", name)
}

/// `host_kernel_static!(name)` is the path of `name`'s host descriptor, `name__HOST` (for
/// `cuda_std::export_host_launch!`, since `macro_rules!` cannot make identifiers).
#[doc(hidden)]
#[proc_macro]
pub fn host_kernel_static(input: TokenStream) -> TokenStream {
    let name = parse_macro_input!(input as Ident);
    host_static_name(&name).into_token_stream().into()
}

#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let attr = proc_macro2::TokenStream::from(attr);
        return syn::Error::new(attr.span(), "#[kernel] takes no arguments")
            .to_compile_error()
            .into();
    }
    let func = parse_macro_input!(item as ItemFn);
    match expand(func) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

fn expand(func: ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let sig = &func.sig;
    if sig.unsafety.is_none() {
        return Err(syn::Error::new(sig.span(), "#[kernel] functions must be `unsafe fn`"));
    }
    if !matches!(sig.output, ReturnType::Default) {
        return Err(syn::Error::new(sig.output.span(), "#[kernel] functions return nothing"));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "#[kernel] functions are not generic: call a generic kernel body from a concrete entry point",
        ));
    }
    let mut params = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(typed) = input else {
            return Err(syn::Error::new(input.span(), "#[kernel] functions take no `self`"));
        };
        let Pat::Ident(ident) = typed.pat.as_ref() else {
            return Err(syn::Error::new(
                typed.pat.span(),
                "#[kernel] parameters must be plain names",
            ));
        };
        params.push((ident.ident.clone(), typed.ty.as_ref().clone()));
    }

    let name = &sig.ident;
    let block = &func.block;
    let vis = &func.vis;
    let inputs = &sig.inputs;
    // `#[no_mangle]` is kept on the device and dropped on the host (see the module docs).
    let is_no_mangle = |a: &&syn::Attribute| a.path().is_ident("no_mangle");
    let device_attrs = &func.attrs;
    let host_attrs: Vec<_> = func.attrs.iter().filter(|a| !is_no_mangle(a)).collect();
    let ptx_abi: Abi = syn::parse_quote!(extern "ptx-kernel");
    let c_abi: Abi = syn::parse_quote!(extern "C-unwind"); // emulated threads fail by unwinding

    let host_static = host_static_name(name);
    let name_str = LitStr::new(&name.to_string(), name.span());
    let param_names: Vec<LitStr> = params
        .iter()
        .map(|(id, _)| LitStr::new(&id.to_string(), id.span()))
        .collect();
    let param_types: Vec<_> = params.iter().map(|(_, ty)| ty).collect();
    let indices = 0..params.len();

    Ok(quote! {
        #[cfg(target_arch = "nvptx64")]
        #(#device_attrs)*
        #vis unsafe #ptx_abi fn #name(#inputs) #block

        #[cfg(not(target_arch = "nvptx64"))]
        #(#host_attrs)*
        #vis unsafe #c_abi fn #name(#inputs) #block

        #[cfg(not(target_arch = "nvptx64"))]
        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        #vis static #host_static: ::cuda_std::host::HostKernel = ::cuda_std::host::HostKernel {
            name: #name_str,
            params: &[#(::cuda_std::host::Param {
                name: #param_names,
                ty: <#param_types as ::cuda_std::host::FromArg>::TYPE,
            }),*],
            call: {
                unsafe fn call(args: &[::cuda_std::host::ArgValue]) {
                    unsafe { #name(#(<#param_types as ::cuda_std::host::FromArg>::from_arg(&args[#indices])),*) }
                }
                call
            },
        };
    })
}
