//! Compile-time checks of kernel launches and kernels: wrong arguments are type errors, and
//! the ways of writing a kernel the guide shows compile.

#[test]
fn wrong_kernel_arguments_do_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

#[test]
fn kernels_written_as_the_guide_shows_compile() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui-pass/*.rs");
}
