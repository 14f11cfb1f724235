//! Raw handles across the boundary between the stages on the layer and those not yet on it
//! (see `tests::NOT_YET_CONVERTED`): conversions of `llvm-sys` pointers, and safe wrappers of
//! the raw helpers those stages share. Each item goes once both sides of its boundary are on
//! the layer.

use inkwell::llvm_sys::prelude::LLVMValueRef;

use super::{Instruction, Value};

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
    super::super::shared_memory::compares_with_null(user, value)
}

/// `panics::site_calls` for a stage that calls `llvm-sys` itself: the calls of `reporters`
/// (compared by address only) in `function` that `unreachable` follows.
pub fn site_calls(
    function: inkwell::values::FunctionValue<'_>,
    reporters: &[LLVMValueRef],
) -> Vec<LLVMValueRef> {
    use inkwell::values::AsValueRef;
    // SAFETY: inkwell's handle is a live function; the reporters are only compared.
    let function = unsafe { Value::from_raw(function.as_value_ref()) }
        .and_then(Value::as_function)
        .expect("an inkwell function is a function");
    function
        .blocks()
        .flat_map(|b| b.instructions())
        .filter_map(|i| i.as_call())
        .filter(|call| {
            reporters.contains(&call.callee().raw())
                && call.next().is_some_and(|next| next.is_unreachable())
        })
        .map(raw)
        .collect()
}

/// `shared_memory::compares_with_null` for a stage that calls `llvm-sys` itself.
///
/// # Safety
/// `user` is a live instruction and `value` a live value, of one module.
pub unsafe fn compares_with_null_raw(user: LLVMValueRef, value: LLVMValueRef) -> bool {
    // SAFETY: the caller's contract.
    let (user, value) = unsafe { (Value::from_raw(user), Value::from_raw(value)) };
    let user = user
        .and_then(Value::as_instruction)
        .expect("compares_with_null of an instruction");
    super::super::shared_memory::compares_with_null(user, value.expect("a value"))
}

/// The users of `value`, each once, collected before any is changed: [`Value::users`] for a
/// stage that calls `llvm-sys` itself.
///
/// # Safety
/// `value` is a live LLVM value.
pub unsafe fn users(value: LLVMValueRef) -> Vec<LLVMValueRef> {
    // SAFETY: the caller's contract.
    let value = unsafe { Value::from_raw(value) }.expect("users of a value");
    value.users().into_iter().map(raw).collect()
}

/// The name of the function `call` calls: empty for an indirect call (and for a value that is
/// no call), for a stage that calls `llvm-sys` itself.
///
/// # Safety
/// `call` is a live LLVM value, of a module that outlives `'a`.
pub unsafe fn callee_name<'a>(call: LLVMValueRef) -> &'a [u8] {
    // SAFETY: the caller's contract.
    let call: Value<'a> = unsafe { Value::from_raw(call) }.expect("the callee of a call");
    call.as_call().map_or(&[], |call| call.callee_name())
}
