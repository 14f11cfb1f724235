//! Compile-time checks of kernel launches: wrong arguments are type errors.

#[test]
fn wrong_kernel_arguments_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
