//! Raw handles across the boundary between the stages on the layer and those not yet on it
//! (see `tests::NOT_YET_CONVERTED`): conversions of `llvm-sys` pointers, and safe wrappers of
//! the raw helpers those stages share. Each item goes once both sides of its boundary are on
//! the layer.

use inkwell::llvm_sys::prelude::LLVMValueRef;

use super::{Call, Function, Instruction, Module, Value};

/// The pointer of `value`, for a stage that calls `llvm-sys` itself.
pub fn raw<'m>(value: impl Into<Value<'m>>) -> LLVMValueRef {
    value.into().raw()
}

/// The handle of `raw`; `None` for null.
///
/// # Safety
/// `raw` is null or a live value of a module borrowed for `'m`.
pub unsafe fn from_raw<'m>(raw: LLVMValueRef) -> Option<Value<'m>> {
    // SAFETY: the caller's contract.
    unsafe { Value::from_raw(raw) }
}

/// Whether `user` (an instruction) compares `value` with null, as
/// `shared_memory::compares_with_null` says.
pub fn compares_with_null<'m>(user: Instruction<'m>, value: Value<'m>) -> bool {
    // SAFETY: both are live values of one module; `user` is an instruction.
    unsafe { super::super::shared_memory::compares_with_null(user.raw(), value.raw()) }
}

/// `uniform_panics::make_sites_uniform` for `panic_sites.rs`, which passes raw functions.
pub fn make_uniform(
    module: &inkwell::module::Module<'_>,
    site_reporters: &[LLVMValueRef],
    thread_reporter: LLVMValueRef,
    thread_index: LLVMValueRef,
) -> usize {
    let function = |raw: LLVMValueRef| {
        // SAFETY: `panic_sites.rs` passes inkwell's pointers of functions of `module`.
        unsafe { Value::from_raw(raw) }
            .and_then(Value::as_function)
            .expect("a function of the module")
    };
    let site_reporters: Vec<Function<'_>> = site_reporters.iter().map(|&r| function(r)).collect();
    super::super::uniform_panics::make_sites_uniform(
        Module::new(module),
        &site_reporters,
        function(thread_reporter),
        function(thread_index),
    )
}

/// `panics::site_calls`: the calls of `reporters` in `function` that `unreachable` follows.
pub fn site_calls<'m>(function: Function<'m>, reporters: &[Function<'m>]) -> Vec<Call<'m>> {
    // SAFETY: `function` is a live function.
    let inkwell_function = unsafe { inkwell::values::FunctionValue::new(function.raw()) }
        .expect("a function is a function");
    // SAFETY: `Function` is a transparent wrapper of `Value`, and `Value` of a non-null
    // `LLVMValueRef` (with a zero-sized marker): the slices have one layout, and the
    // pointers are live functions.
    let reporters: &[LLVMValueRef] =
        unsafe { std::slice::from_raw_parts(reporters.as_ptr().cast(), reporters.len()) };
    super::super::panics::site_calls(inkwell_function, reporters)
        .into_iter()
        .map(|raw| {
            // SAFETY: `site_calls` returns calls of `function`, of the module borrowed for
            // `'m`.
            unsafe { Value::from_raw(raw) }
                .and_then(Value::as_call)
                .expect("a site call is a call")
        })
        .collect()
}
