//! How far apart neighbouring threads' addresses of an access are: whether a thread loop's
//! vectors load and store it whole, or gather and scatter it lane by lane.

use std::collections::HashMap;

use inkwell::values::InstructionOpcode;

use super::super::ir::{Instruction, Module, Value};
use super::exits::signed_constant;
use super::hooks::{Complete, index_of, is_index_call};
use super::kinds::{Kind, Kinds};
use super::uniform::is_pure;
use offload_format::abi;

/// The strides of a body's values, memoized.
struct Strides<'a, 'k, 'm> {
    module: Module<'m>,
    hooks: &'a Complete<'m>,
    kinds: &'a mut Kinds<'k, 'm>,
    memo: HashMap<Value<'m>, Option<i64>>,
}

impl<'m> Strides<'_, '_, 'm> {
    /// The bytes between the addresses of threads `x` and `x + 1` in `value`, an address or an
    /// index of one, where that is the same for every `x` of a row: `Some(0)` for a value the
    /// row shares. `None` where it is not (a warp's slot `sums[x >> 5]`, a partner `x ^ j`) or
    /// cannot be told (a thread's value loaded from memory).
    fn of(&mut self, value: Value<'m>) -> Option<i64> {
        if let Some(&known) = self.memo.get(&value) {
            return known;
        }
        let Some(i) = value.as_instruction() else {
            return Some(0);
        };
        if self.kinds.of(value) == Kind::Hoistable {
            return Some(0);
        }
        if is_index_call(i, self.hooks) {
            // The thread's `x` and its rank step by one along a row; `y` and `z` do not change.
            return match index_of(i).ok()? {
                0 => Some(1),
                w if w == u64::from(abi::CPU_IR_RANK) => Some(1),
                1 | 2 => Some(0),
                _ => None,
            };
        }
        self.memo.insert(value, None);
        let result = self.of_instruction(i);
        self.memo.insert(value, result);
        result
    }

    fn of_instruction(&mut self, i: Instruction<'m>) -> Option<i64> {
        use InstructionOpcode as Op;
        let module = self.module;
        let mut operand = |n: u32| -> Option<i64> { self.of(i.operand(n)?) };
        let constant = |n: u32| i.operand(n).and_then(signed_constant);
        match i.opcode() {
            Op::ZExt | Op::SExt | Op::Trunc => operand(0),
            Op::Add => Some(operand(0)?.checked_add(operand(1)?)?),
            Op::Sub => Some(operand(0)?.checked_sub(operand(1)?)?),
            Op::Mul => match (constant(0), constant(1)) {
                (_, Some(c)) => operand(0)?.checked_mul(c),
                (Some(c), _) => operand(1)?.checked_mul(c),
                _ => (operand(0)? == 0 && operand(1)? == 0).then_some(0),
            },
            Op::Shl => {
                let k = u32::try_from(constant(1)?).ok().filter(|&k| k < 63)?;
                operand(0)?.checked_mul(1 << k)
            }
            Op::GetElementPtr => {
                let gep = i.as_value().as_gep()?;
                let mut ty = gep.source_element_type();
                let mut total = operand(0)?;
                for n in 1..i.num_operands() {
                    let step = operand(n)?;
                    if step != 0 {
                        let size = module.abi_size(ty) as i64;
                        total = total.checked_add(step.checked_mul(size)?)?;
                    }
                    if n + 1 < i.num_operands() {
                        // Past the first index, only arrays are stepped through alike.
                        ty = ty.element_type()?;
                    }
                }
                Some(total)
            }
            op if is_pure(op) => {
                let shared = (0..i.num_operands()).all(|n| operand(n) == Some(0));
                shared.then_some(0)
            }
            _ => None,
        }
    }
}

/// Whether some access of `instructions` would be a gather or a scatter in a thread loop's
/// vectors: its address depends on the thread, and otherwise than one element further for
/// the next thread.
pub(super) fn gathers_or_scatters<'m>(
    module: Module<'m>,
    instructions: &[Instruction<'m>],
    hooks: &Complete<'m>,
    kinds: &mut Kinds<'_, 'm>,
) -> bool {
    let mut strides = Strides {
        module,
        hooks,
        kinds,
        memo: HashMap::new(),
    };
    instructions.iter().any(|i| {
        let (address, accessed) = match i.opcode() {
            InstructionOpcode::Load => (i.operand(0), Some(i.as_value().ty())),
            InstructionOpcode::Store => (i.operand(1), i.operand(0).map(|v| v.ty())),
            _ => return false,
        };
        let (Some(address), Some(accessed)) = (address, accessed) else {
            return false;
        };
        if in_a_local(address) {
            // A thread's own local: one lane of its copies, which lie side by side.
            return false;
        }
        match strides.of(address) {
            Some(0) => false,
            Some(bytes) => bytes != module.abi_size(accessed) as i64,
            None => true,
        }
    })
}

/// Whether `address` is an alloca or an address in one.
fn in_a_local(address: Value<'_>) -> bool {
    address.is_alloca() || (address.is_gep() && address.operands().next().is_some_and(in_a_local))
}
