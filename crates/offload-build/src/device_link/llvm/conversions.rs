//! Rust's float-to-integer `as` on NVIDIA GPUs. `as` saturates and maps NaN to 0
//! (`llvm.fptosi.sat`, `llvm.fptoui.sat`), which NVPTX lowers as a conversion followed by
//! three comparisons and three selects. PTX's `cvt.rzi` already clamps to the destination's
//! range, so each such call becomes the NVVM intrinsic that is that one instruction
//! (`llvm.nvvm.f2i.rz` and its kin), as CUDA C's `(int)x` compiles. NaN is the exception: a
//! `float` to a 32-bit integer gives 0, as Rust does, but on an H200 a `double` to `i32` gave
//! `0x8000_0000` and either to a 64-bit integer gives `0x8000_0000_0000_0000` (as LLVM's
//! constant folds of those intrinsics say), so every other conversion keeps one NaN test and
//! select. After optimization, on NVPTX only.

#![forbid(unsafe_code)]

use inkwell::FloatPredicate;
use inkwell::module::Module;

use super::ir::{self, Function, TypeKind};

/// The NVVM intrinsic for a saturating conversion: (signed, from `double`, to 64 bits).
fn nvvm_intrinsic(signed: bool, from_double: bool, to_64: bool) -> &'static str {
    match (signed, from_double, to_64) {
        (true, false, false) => "llvm.nvvm.f2i.rz",
        (false, false, false) => "llvm.nvvm.f2ui.rz",
        (true, true, false) => "llvm.nvvm.d2i.rz",
        (false, true, false) => "llvm.nvvm.d2ui.rz",
        (true, false, true) => "llvm.nvvm.f2ll.rz",
        (false, false, true) => "llvm.nvvm.f2ull.rz",
        (true, true, true) => "llvm.nvvm.d2ll.rz",
        (false, true, true) => "llvm.nvvm.d2ull.rz",
    }
}

/// Replaces every scalar `llvm.fpto{s,u}i.sat` from `float` or `double` to `i32` or `i64` by
/// its NVVM intrinsic; returns how many calls were replaced.
pub(super) fn saturating_conversions(module: &Module<'_>) -> usize {
    let module = ir::Module::new(module);
    let builder = module.builder();
    let mut replaced = 0;
    // A call is erased only after its uses are replaced, and a declaration is deleted only
    // once it has no uses. Collected first: a declaration left without calls is deleted on
    // the way.
    let functions: Vec<_> = module.functions().collect();
    for function in functions {
        let name = function.name();
        let signed = if name.starts_with(b"llvm.fptosi.sat.") {
            true
        } else if name.starts_with(b"llvm.fptoui.sat.") {
            false
        } else {
            continue;
        };
        let Some((from_double, to_64)) = scalar_types(function) else {
            continue;
        };
        let name = nvvm_intrinsic(signed, from_double, to_64);
        let target = module
            .function(name)
            .unwrap_or_else(|| module.add_function(name, function.function_type()));
        for call in function.users() {
            let Some(call) = call.as_call() else {
                continue;
            };
            builder.position_before(*call);
            let argument = call.operand(0).expect("a conversion has an argument");
            let converted = builder.build_call(target, &[argument], c"").as_value();
            let new = if from_double || to_64 {
                let is_nan = builder.build_fcmp(FloatPredicate::UNO, argument, argument, c"");
                let zero = converted.ty().const_null();
                builder.build_select(is_nan, zero, converted, c"")
            } else {
                converted
            };
            call.replace_all_uses_with(new);
            call.erase();
            replaced += 1;
        }
        if !function.has_uses() {
            function.delete();
        }
    }
    replaced
}

/// For `iN @llvm.fpto?i.sat.iN.fM(fM)` with a scalar `float` or `double` argument and an
/// `i32` or `i64` result: (from `double`, to 64 bits).
fn scalar_types(declaration: Function<'_>) -> Option<(bool, bool)> {
    let ty = declaration.function_type();
    let &[param] = ty.param_types().as_slice() else {
        return None;
    };
    let from_double = match param.kind() {
        TypeKind::Float => false,
        TypeKind::Double => true,
        _ => return None,
    };
    match ty.return_type()?.int_width()? {
        32 => Some((from_double, false)),
        64 => Some((from_double, true)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bitcode, link};
    use crate::device_link::rlib_bitcode::DeviceInput;

    /// `f as i32`, `f as u32`, `d as i64` and `d as u64`: one `cvt.rzi` each, no range
    /// comparison or select around it; the ones from `double` keep one NaN test and select
    /// each.
    #[test]
    fn float_to_integer_casts_are_one_conversion() {
        let ir = "declare i32 @llvm.fptosi.sat.i32.f32(float)\n\
                  declare i32 @llvm.fptoui.sat.i32.f32(float)\n\
                  declare i64 @llvm.fptosi.sat.i64.f64(double)\n\
                  declare i64 @llvm.fptoui.sat.i64.f64(double)\n\
                  define ptx_kernel void @casts(float %f, double %d, ptr %out) {\n\
                  \x20 %a = call i32 @llvm.fptosi.sat.i32.f32(float %f)\n\
                  \x20 %b = call i32 @llvm.fptoui.sat.i32.f32(float %f)\n\
                  \x20 %c = call i64 @llvm.fptosi.sat.i64.f64(double %d)\n\
                  \x20 %e = call i64 @llvm.fptoui.sat.i64.f64(double %d)\n\
                  \x20 %ab = add i32 %a, %b\n\
                  \x20 %ce = add i64 %c, %e\n\
                  \x20 %w = zext i32 %ab to i64\n\
                  \x20 %s = add i64 %w, %ce\n\
                  \x20 store i64 %s, ptr %out, align 8\n\
                  \x20 ret void\n\
                  }\n";
        let ptx = link(&[DeviceInput::object("casts.bc", bitcode("casts", ir))]).unwrap();
        for cvt in [
            "cvt.rzi.s32.f32",
            "cvt.rzi.u32.f32",
            "cvt.rzi.s64.f64",
            "cvt.rzi.u64.f64",
        ] {
            assert!(ptx.contains(cvt), "{cvt}:\n{ptx}");
        }
        let count = |what: &str| ptx.lines().filter(|l| l.contains(what)).count();
        // One NaN test of `d` (both 64-bit casts share it), one select per 64-bit cast.
        assert_eq!(count("setp"), 1, "{ptx}");
        assert_eq!(count("setp.nan.f64"), 1, "{ptx}");
        assert_eq!(count("selp"), 2, "{ptx}");
    }
}
