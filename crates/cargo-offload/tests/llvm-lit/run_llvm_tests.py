#!/usr/bin/env python3
"""Runs LLVM's own tests of clang-offload-bundler and llvm-offload-binary twice, with
LLVM 22's tools and with cargo-offload's, and compares them.

Two passes:

1. lit, per test file: LLVM's `lit` with lit.cfg.py, once per tool set, PASS/FAIL/UNSUPPORTED.
2. Per RUN line: every RUN line of every test file, lit's substitutions applied, run with
   bash (pipefail, as lit's shell) in two sandboxes of equal path length. Lines that do not
   run a tool under test run with LLVM's tools only, in sandbox A. Before a line that runs
   one, sandbox B is made a copy of A (paths inside files rewritten), the line runs in both,
   A with LLVM's tools on PATH and B with cargo-offload's wrappers first: the two agree when
   their exit statuses are equal and every file the line created, changed or removed is
   byte-identical (B's sandbox path read as A's). So each line is judged on the same inputs,
   whatever an earlier line of ours did.

The observed set of (file, line, kind) is compared with known-disagreements.txt:
  disagree    the two tool sets disagree on the line;
  llvm-fails  the line fails with LLVM 22.1.8's own tools (a later LLVM's feature or an
              assertions build), whatever ours does.
Any difference from the list, in either direction, fails the run: a new disagreement, and a
listed one that no longer happens (the list only shrinks).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

# cargo-offload run under one of these names is that tool (its `bundle` or `package`).
TOOLS_UNDER_TEST = ("clang-offload-bundler", "clang-offload-packager", "llvm-offload-binary")
TOOL_RE = re.compile(
    r"(?<![\w./-])(?:%s)(?![\w.-])" % "|".join(re.escape(t) for t in TOOLS_UNDER_TEST)
)
LINE_TIMEOUT_S = 300


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", required=True, help="directory of the LLVM test files (llvm-project layout)")
    p.add_argument("--tests", required=True, help="file listing the test files, relative to --suite")
    p.add_argument("--known", required=True, help="known-disagreements.txt")
    p.add_argument("--cargo-offload", required=True, help="the cargo-offload binary")
    p.add_argument("--llvm-bin", required=True, help="LLVM 22's binary directory")
    p.add_argument("--lit", required=True, help="LLVM's lit")
    p.add_argument("--clang", required=True, help="clang-22")
    p.add_argument("--work", required=True, help="scratch directory (emptied first)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", help="write the full results here")
    return p.parse_args()


def read_test_list(path):
    tests = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            _commit, rel = line.split()
            if rel.endswith((".c", ".ll", ".test")):
                tests.append(rel)
    return tests


def read_known(path):
    """known-disagreements.txt: ({(file, line, kind): (cause, reason)}, {file: (llvm, ours)})."""
    known, lit_codes = {}, {}
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^lit\s+(\S+)\s+([A-Z]+)\s+([A-Z]+)\s+--\s+(.*)$", line)
            if m:
                lit_codes[m.group(1)] = (m.group(2), m.group(3))
                continue
            m = re.match(r"^(\S+):(\d+)\s+(disagree|llvm-fails)\s+(\S+)\s+--\s+(.*)$", line)
            if not m:
                sys.exit("%s:%d: neither `FILE:LINE KIND CAUSE -- REASON` nor `lit FILE CODE CODE -- REASON`: %s" % (path, n, line))
            key = (m.group(1), int(m.group(2)), m.group(3))
            if key in known:
                sys.exit("%s:%d: listed twice: %s:%d %s" % (path, n, *key))
            known[key] = (m.group(4), m.group(5))
    return known, lit_codes


def settings_for(args, wrappers):
    llvm_bin = os.path.abspath(args.llvm_bin)
    system_path = os.environ.get("PATH", "/usr/bin:/bin")
    clangxx = os.path.join(os.path.dirname(os.path.abspath(args.clang)), "clang++")
    if not os.path.exists(clangxx):
        clangxx = args.clang + " --driver-mode=g++"
    triple = subprocess.run(
        [args.clang, "-dumpmachine"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return {
        "target_triple": triple,
        # LLVM 22 as Debian builds it: these targets, zlib and zstd, no assertions.
        "features": [
            "x86-registered-target",
            "nvptx-registered-target",
            "amdgpu-registered-target",
            "powerpc-registered-target",
            "zlib",
            "zstd",
            "system-linux",
        ],
        # lit applies these, in order, as regular expressions, before its own (%s, %t, ...).
        "substitutions": [
            ["%clangxx", clangxx],
            ["%clang", os.path.abspath(args.clang)],
            ["%itanium_abi_triple", triple],
            ["%errc_ENOENT", "'No such file or directory'"],
        ],
        "path": {
            "llvm": os.pathsep.join([llvm_bin, system_path]),
            "ours": os.pathsep.join([wrappers, llvm_bin, system_path]),
        },
    }


def write_wrappers(directory, cargo_offload):
    """cargo-offload under each tool's name: run so, it is that tool (as a user installs it)."""
    os.makedirs(directory, exist_ok=True)
    for name in TOOLS_UNDER_TEST:
        path = os.path.join(directory, name)
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(cargo_offload, path)


# ------------------------------------------------------------------------------ lit pass


def run_lit(args, suite, settings_file, tools, work):
    exec_root = os.path.join(work, "lit-" + tools)
    out = os.path.join(work, "lit-%s.json" % tools)
    cmd = [
        args.lit,
        "-q",
        "-j%d" % args.jobs,
        "--param", "settings=" + settings_file,
        "--param", "tools=" + tools,
        "--param", "exec_root=" + exec_root,
        "-o", out,
        suite,
    ]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if not os.path.exists(out):
        sys.exit("lit (%s) wrote no results:\n%s%s" % (tools, proc.stdout, proc.stderr))
    with open(out) as f:
        results = json.load(f)
    codes = {}
    for t in results["tests"]:
        # "llvm-offload-tools-llvm :: clang/test/Driver/x.c"
        codes[t["name"].split(" :: ", 1)[1]] = t["code"]
    return codes, seconds


# ------------------------------------------------------------------------- per-line pass


def run_commands(path):
    """The RUN commands of a test file as lit reads them: [(first line number, command)]."""
    commands = []
    continued = False
    with open(path, encoding="latin-1") as f:
        for number, line in enumerate(f, 1):
            at = line.find("RUN:")
            if at < 0:
                continue
            text = line[at + 4 :].rstrip()
            if continued:
                commands[-1][1] = commands[-1][1][:-1] + text
            else:
                commands.append([number, text])
            continued = commands[-1][1].endswith("\\")
    return [(n, c.strip()) for n, c in commands]


def substitute(command, subs):
    marker = "#_MARKER_#"
    command = command.replace("%%", marker)
    for pattern, replacement in subs:
        command = re.sub(pattern, replacement.replace("\\", "\\\\"), command.replace("%%", marker))
    return command.replace(marker, "%")


def line_substitutions(settings, source, exec_dir):
    output_dir = os.path.join(exec_dir, "Output")
    tmp = os.path.join(output_dir, os.path.basename(source) + ".tmp")
    source_dir = os.path.dirname(source)
    return (
        [("%T", output_dir)]
        + [tuple(s) for s in settings["substitutions"]]
        + [("%{pathsep}", os.pathsep), ("%s", source), ("%S", source_dir), ("%p", source_dir), ("%t", tmp)]
    )


def snapshot(root):
    files = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return files


def copy_tree_rewriting(src, dst, old, new):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    for dirpath, _dirs, names in os.walk(src):
        target_dir = os.path.join(dst, os.path.relpath(dirpath, src))
        os.makedirs(target_dir, exist_ok=True)
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read().replace(old, new)
            with open(os.path.join(target_dir, name), "wb") as f:
                f.write(data)
            shutil.copymode(path, os.path.join(target_dir, name))


def run_line(command, cwd, path_env):
    env = dict(os.environ)
    env["PATH"] = path_env
    for var in ("OFFLOAD_BUNDLER_COMPRESS", "OFFLOAD_BUNDLER_VERBOSE"):
        env.pop(var, None)
    try:
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            timeout=LINE_TIMEOUT_S,
        )
        return proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", (e.stdout or b"") + (e.stderr or b"")


def excerpt(data, limit=600):
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[:limit] + " [...]"


def compare_lines(args, settings, suite, test, work):
    """Per-line results of one test file: [dict]."""
    root_a = os.path.join(work, "lines", "A")
    root_b = os.path.join(work, "lines", "B")
    rel_dir = os.path.dirname(test)
    exec_a = os.path.join(root_a, rel_dir)
    exec_b = os.path.join(root_b, rel_dir)
    for d in (root_a, root_b):
        if os.path.exists(d):
            shutil.rmtree(d)
    os.makedirs(os.path.join(exec_a, "Output"))
    os.makedirs(os.path.join(exec_b, "Output"))
    source = os.path.join(suite, test)
    subs_a = line_substitutions(settings, source, exec_a)
    subs_b = line_substitutions(settings, source, exec_b)
    old, new = root_a.encode(), root_b.encode()
    results = []
    for number, raw in run_commands(source):
        cmd_a = substitute(raw, subs_a)
        cmd_b = substitute(raw, subs_b)
        result = {"line": number, "command": raw}
        if not TOOL_RE.search(raw):
            status, out = run_line(cmd_a, exec_a, settings["path"]["llvm"])
            result.update(tool=False, status_llvm=status, output_llvm=excerpt(out))
            results.append(result)
            continue
        copy_tree_rewriting(root_a, root_b, old, new)
        before = snapshot(root_a)
        status_a, out_a = run_line(cmd_a, exec_a, settings["path"]["llvm"])
        status_b, out_b = run_line(cmd_b, exec_b, settings["path"]["ours"])
        after_a, after_b = snapshot(root_a), snapshot(root_b)
        touched = {p for p in set(before) | set(after_a) | set(after_b) if not (before.get(p) == after_a.get(p) == after_b.get(p))}
        differing = []
        for p in sorted(touched):
            a_path, b_path = os.path.join(root_a, p), os.path.join(root_b, p)
            a_data = open(a_path, "rb").read() if p in after_a else None
            b_data = open(b_path, "rb").read().replace(new, old) if p in after_b else None
            if a_data != b_data:
                differing.append(
                    "%s (%s)"
                    % (
                        p,
                        "only LLVM's" if b_data is None else "only ours" if a_data is None
                        else "%d vs %d bytes" % (len(a_data), len(b_data)),
                    )
                )
        result.update(
            tool=True,
            status_llvm=status_a,
            status_ours=status_b,
            differing_files=differing,
            output_llvm=excerpt(out_a),
            output_ours=excerpt(out_b.replace(new, old)),
        )
        results.append(result)
    return results


def kind_of(result):
    if result["status_llvm"] != 0:
        return "llvm-fails"
    if result["tool"] and (result["status_ours"] != result["status_llvm"] or result["differing_files"]):
        return "disagree"
    return None


def main():
    args = parse_args()
    start = time.monotonic()
    work = os.path.abspath(args.work)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    suite = os.path.abspath(args.suite)
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("lit.cfg.py", "offload_lit_format.py"):
        shutil.copy(os.path.join(here, name), suite)
    wrappers = os.path.join(work, "wrappers")
    write_wrappers(wrappers, os.path.abspath(args.cargo_offload))
    settings = settings_for(args, wrappers)
    settings_file = os.path.join(work, "settings.json")
    with open(settings_file, "w") as f:
        json.dump(settings, f, indent=1)
    tests = read_test_list(args.tests)
    known, expected_lit = read_known(args.known)

    lit_llvm, seconds_llvm = run_lit(args, suite, settings_file, "llvm", work)
    lit_ours, seconds_ours = run_lit(args, suite, settings_file, "ours", work)

    observed = {}
    per_file = {}
    for test in tests:
        results = compare_lines(args, settings, suite, test, work)
        tool_lines = [r for r in results if r["tool"]]
        counts = {"lines": len(results), "tool_lines": len(tool_lines), "agree": 0, "disagree": 0, "llvm-fails": 0}
        for r in results:
            kind = kind_of(r)
            if kind:
                observed[(test, r["line"], kind)] = r
                counts[kind] += 1
            elif r["tool"]:
                counts["agree"] += 1
        per_file[test] = {
            "lit_llvm": lit_llvm.get(test, "MISSING"),
            "lit_ours": lit_ours.get(test, "MISSING"),
            "counts": counts,
            "lines": results,
        }

    problems = []
    for key in sorted(set(observed) - set(known)):
        r = observed[key]
        detail = "exit %s with LLVM's tools, %s with ours" % (r["status_llvm"], r.get("status_ours", "-"))
        if r.get("differing_files"):
            detail += "; files differ: " + ", ".join(r["differing_files"])
        problems.append(
            "NEW %s:%d %s: %s\n    RUN: %s\n    LLVM's output: %s\n    our output:    %s"
            % (key[0], key[1], key[2], detail, r["command"], r["output_llvm"] or "(none)", r.get("output_ours") or "(none)")
        )
    for key in sorted(set(known) - set(observed)):
        problems.append(
            "FIXED %s:%d %s (%s): no longer happens; remove it from known-disagreements.txt"
            % (key[0], key[1], key[2], known[key][0])
        )
    for test, info in per_file.items():
        got = (info["lit_llvm"], info["lit_ours"])
        if expected_lit.get(test) != got:
            problems.append(
                "lit %s: %s with LLVM's tools, %s with ours; known-disagreements.txt says %s"
                % (test, got[0], got[1], "%s, %s" % expected_lit[test] if test in expected_lit else "nothing")
            )
        if info["lit_llvm"] == "PASS" and info["lit_ours"] != "PASS" and not info["counts"]["disagree"]:
            problems.append(
                "lit: %s passes with LLVM's tools and is %s with ours, yet no RUN line disagrees"
                % (test, info["lit_ours"])
            )
        if test not in lit_llvm or test not in lit_ours:
            problems.append("lit: %s was not run" % test)

    print("LLVM's tests of the offload tools, LLVM 22.1.8's tools against cargo-offload's")
    print("%-68s %-12s %-12s %6s %6s %9s %11s" % ("test file", "lit: LLVM", "lit: ours", "lines", "agree", "disagree", "llvm-fails"))
    for test, info in per_file.items():
        c = info["counts"]
        print(
            "%-68s %-12s %-12s %6d %6d %9d %11d"
            % (test, info["lit_llvm"], info["lit_ours"], c["tool_lines"], c["agree"], c["disagree"], c["llvm-fails"])
        )
    print("(lines: RUN lines that run a tool under test; llvm-fails counts every RUN line that fails with LLVM's tools)")
    elapsed = time.monotonic() - start
    print("lit: %.0f s with LLVM's tools, %.0f s with ours; %.0f s in all" % (seconds_llvm, seconds_ours, elapsed))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"files": per_file, "problems": problems}, f, indent=1)
    if problems:
        print("\n%d difference(s) from known-disagreements.txt:" % len(problems))
        for p in problems:
            print(p)
        return 1
    print("every disagreement is the one known-disagreements.txt lists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
