#!/usr/bin/env python3
"""Checks that README.md's commands and flags are real. Reads README's code blocks, inline code
and tables, finds the invocations of kolo's programs (kolorun, kolo-perf and its nccl-tests
names, kolo-train, kolo-store, kolo-bench-*, ..., scripts/*.sh, python3 -m kolo_torch.run,
examples' scripts) and checks:

  ReadmeCheck.PathsExist          every repository path README names (scripts, sources, links)
                                  exists, and every built program it names is in BUILD_DIR;
  ReadmeCheck.FlagsInHelp         every -x / --flag README gives a program appears in that
                                  program's --help output (built programs, run from BUILD_DIR;
                                  python -m kolo_torch.run) or, for a script, in its text;
  ReadmeCheck.KoloVariablesExist  every KOLO_* variable README names is a row of the tunables
                                  table (common/config.cpp), or a program's variable that
                                  docs/ENVIRONMENT.md documents and the code reads;
  ReadmeCheck.LayoutListsFolders  README's Layout names every tracked top-level folder and each
                                  of their subfolders, and nothing that does not exist.

A flag in a command goes to the program before it (`kolorun -n 4 kolo-perf allreduce -b 8`: -n
to kolorun, -b to kolo-perf). A flag written alone in prose (`--data FILE`) goes to the program
named nearest before it in the same paragraph or list item; when that program's help lacks it,
any kolo program the same section names may have it; in a table whose header names a program
(`meaning in kolo-perf`), to that program. Flags after a program that is not kolo's (torchrun,
mpirun, ...) are not checked. Prints GoogleTest-style lines for scripts/test.sh.

usage: readme_check.py SOURCE_ROOT BUILD_DIR [--readme FILE] [-v]
"""
import os
import re
import shlex
import subprocess
import sys

NCCL_NAMES = ["all_reduce_perf", "all_gather_perf", "broadcast_perf", "reduce_perf", "reduce_scatter_perf",
              "alltoall_perf", "scatter_perf", "gather_perf", "sendrecv_perf"]
# Built programs a README check must find; the others (built only with OpenBLAS, MPI, Gloo,
# CUDA, ...) are checked when the build has them.
REQUIRED_PROGRAMS = {"kolorun", "kolo-perf", "kolo-store"} | set(NCCL_NAMES)
# Launchers: the first argument that is not an option (or an option's value) is the program run.
LAUNCHERS = {"kolorun", "kolo_torch.run"}
REPO_PATH = re.compile(r"^(?:\./)?((?:scripts|bench|tests|examples|docs|src|include|python|transports|kernels|common|tools|\.ci)"
                       r"/[A-Za-z0-9_./+-]*)$")
SEPARATORS = {"&&", "||", ";", "|"}
# Commands that are not kolo's: a flag README writes after one of these is theirs, not checked.
# Any other first word of an inline span (`KOLO_JOB_ID`, `import kolo_torch`) is not a command.
EXTERNAL_COMMANDS = {"torchrun", "mpirun", "mpiexec", "srun", "meson", "ninja", "pkg-config", "apt-get", "apt",
                     "pip", "pip3", "env", "taskset", "valgrind", "perf", "iperf3", "sh", "bash", "export", "cd", "ip",
                     "docker", "ssh", "git", "kill", "timeout", "gdb", "strace", "nvidia-smi", "compute-sanitizer",
                     "sudo", "make", "cmake", "gnuplot", "ib_write_bw", "ibv_rc_pingpong", "debootstrap", "chroot"}


class Program:
    """A program README may invoke: a built binary, a script of the tree, or a python module."""

    def __init__(self, name, kind, path=None):
        self.name, self.kind, self.path = name, kind, path
        self._help = None

    @property
    def kolo(self):
        return self.kind != "external"

    def help_text(self, ctx):
        if self._help is None:
            self._help = ctx.help_of(self)
        return self._help


class Context:
    def __init__(self, root, build, verbose):
        self.root, self.build, self.verbose = root, build, verbose
        self.binaries = self._find_binaries()
        self.programs = {}
        self.failures = {}
        self.notes = []

    def _find_binaries(self):
        found = {}
        for dirpath, dirnames, filenames in os.walk(self.build):
            dirnames[:] = [d for d in dirnames if not d.endswith(".p") and not d.startswith(".")
                           and d not in ("meson-private", "meson-logs", "meson-info", "layer-views")]
            for f in filenames:
                if not (f.startswith("kolo") or f in NCCL_NAMES):
                    continue
                p = os.path.join(dirpath, f)
                if os.access(p, os.X_OK) and not f.endswith((".so", ".a", ".py", ".sh")) and ".so." not in f:
                    found.setdefault(f, p)
        return found

    def fail(self, case, text):
        self.failures.setdefault(case, []).append(text)

    def info(self, text):
        if self.verbose:
            print("[   INFO   ] " + text)

    # What a token names, if a program.
    def program(self, token):
        token = token.strip("[]()'\",")
        if not token or token.startswith("-"):
            return None
        base = token.split("/")[-1]
        m = REPO_PATH.match(token)
        if token == "kolo_torch.run":
            key, kind, path = "kolo_torch.run", "module", None
        elif m and base and (base.endswith((".sh", ".py")) or m.group(1).startswith("scripts/")):
            key, kind, path = m.group(1), "script", os.path.join(self.root, m.group(1))
        elif base == "kolorun" or base.startswith("kolo-") or base in NCCL_NAMES:
            key, kind, path = base, "binary", self.binaries.get(base)
        else:
            return None
        if key not in self.programs:  # one Program per program, however README spells its path
            self.programs[key] = Program(key, kind, path)
        return self.programs[key]

    def help_of(self, prog):
        if prog.kind == "script":
            try:
                with open(prog.path, encoding="utf-8", errors="replace") as f:
                    return f.read()
            except OSError:
                return None
        if prog.kind == "binary":
            if prog.path is None:
                return None
            cmd = [prog.path, "--help"]
        elif prog.kind == "module":
            pydir = os.path.join(self.build, "python")
            if not os.path.isdir(os.path.join(pydir, "kolo_torch")):
                return None
            python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
            cmd = [python, "-m", prog.name, "--help"]
        else:
            return None
        env = dict(os.environ)
        if prog.kind == "module":
            env["PYTHONPATH"] = os.path.join(self.build, "python") + os.pathsep + env.get("PYTHONPATH", "")
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                               env=env, cwd=self.root)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.notes.append("%s --help failed to run: %s" % (prog.name, e))
            return None
        if prog.kind == "module" and r.returncode != 0:
            self.notes.append("%s --help exited %d (torch not importable?): its flags are not checked"
                              % (prog.name, r.returncode))
            return None
        return r.stdout


def has_flag(text, flag):
    return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", text) is not None


def takes_value(text, flag):
    """Whether the help shows `flag PLACEHOLDER` (kolorun's `-n, --nproc N`, argparse's metavars)."""
    return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?:,\s*-{1,2}[\w-]+)*[ =][A-Z][A-Z0-9_=]*(?![a-z])",
                     text) is not None


def clean_flag(token):
    token = token.strip("[](),;'\"")
    if not token.startswith("-") or token in ("-", "--") or re.match(r"^-[0-9.]", token):
        return None
    return token.split("=", 1)[0]


def tokenize(text):
    text = text.replace("\\|", "|")
    try:
        lex = shlex.shlex(text, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        lex.commenters = "#"
        return list(lex)
    except ValueError:
        return text.split()


class Checker:
    def __init__(self, ctx, readme):
        self.ctx = ctx
        self.readme = readme
        with open(readme, encoding="utf-8") as f:
            self.text = f.read()
        self.checked_flags = 0
        self.checked_paths = 0

    # README as blocks: (kind, section, lines); kind is code, table, heading or text.
    def blocks(self):
        lines = self.text.split("\n")
        section = ""
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("```"):
                j = i + 1
                while j < len(lines) and not lines[j].startswith("```"):
                    j += 1
                yield "code", section, lines[i + 1:j]
                i = j + 1
            elif line.startswith("#"):
                section = line.lstrip("#").strip()
                yield "heading", section, [line]
                i += 1
            elif line.startswith("|"):
                j = i
                while j < len(lines) and lines[j].startswith("|"):
                    j += 1
                yield "table", section, lines[i:j]
                i = j
            elif line.strip():
                j = i + 1
                while j < len(lines) and lines[j].strip() and not lines[j].startswith(("```", "#", "|", "- ")):
                    j += 1
                yield "text", section, lines[i:j]
                i = j
            else:
                i += 1

    def check_path(self, token):
        token = token.strip("[]()'\",.;:")
        if "<" in token or "*" in token or "{" in token or "$" in token:
            return
        m = REPO_PATH.match(token)
        if m:
            self.checked_paths += 1
            if not os.path.exists(os.path.join(self.ctx.root, m.group(1))):
                self.ctx.fail("ReadmeCheck.PathsExist", "%s: no such file or folder in the tree" % token)
            return
        if token.startswith("build/"):
            prog = self.ctx.program(token)
            if prog is not None and prog.kind == "binary":
                self.checked_paths += 1
                if prog.path is None and prog.name in REQUIRED_PROGRAMS:
                    self.ctx.fail("ReadmeCheck.PathsExist", "%s: not built in %s" % (token, self.ctx.build))
                elif prog.path is None:
                    self.ctx.notes.append("%s is not in this build (an optional program): not checked" % token)

    def check_flag(self, prog, flag, where):
        help_text = prog.help_text(self.ctx)
        if help_text is None:
            if prog.kind == "binary" and prog.name in REQUIRED_PROGRAMS:
                self.ctx.fail("ReadmeCheck.FlagsInHelp", "%s: cannot read %s --help" % (where, prog.name))
            else:
                self.ctx.notes.append("%s: %s %s not checked (%s unavailable)" % (where, prog.name, flag, prog.name))
            return True
        self.checked_flags += 1
        return has_flag(help_text, flag)

    # A command: tokens after the program are its flags, until a separator or another program.
    def command(self, text, where, mentions, from_code=False):
        tokens = tokenize(text)

        def other(tok, known=False):  # a program not kolo's; a lone flag after it is not checked
            prog = Program(tok, "external")
            if from_code or known or tok.split("/")[-1] in EXTERNAL_COMMANDS:
                mentions.append(prog)
            return prog

        current = None
        expect_command = True
        swallow = False
        for tok in tokens:
            self.check_path(tok)
            if tok in SEPARATORS:
                current, expect_command, swallow = None, True, False
                continue
            if swallow:
                swallow = False
                continue
            prog = self.ctx.program(tok)
            if expect_command:
                if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tok):
                    continue  # an environment assignment
                expect_command = False
                if prog is None and re.match(r"^(?:.*/)?python3?(?:\.\d+)?$", tok):
                    current = "python"
                    continue
                if prog is None:
                    current = other(tok)
                else:
                    current = prog
                    mentions.append(prog)
                continue
            if current == "python":
                if tok == "-m":
                    continue
                if prog is None:
                    current = other("python3 " + tok, known=True)
                else:
                    current = prog
                    mentions.append(prog)
                continue
            if prog is not None and prog.kolo:
                current = prog
                mentions.append(prog)
                continue
            if tok == "--":
                if current is not None and current.kind != "external" and current.name in LAUNCHERS:
                    expect_command = True  # kolorun ... -- program
                else:
                    current = Program("(after --)", "external")
                continue
            flag = clean_flag(tok)
            if flag is None:
                if current is not None and current.kolo and current.name in LAUNCHERS:
                    current = other(tok)  # the launched program, not kolo's
                continue
            if current is None or not current.kolo:
                continue
            if not self.check_flag(current, flag, where):
                self.ctx.fail("ReadmeCheck.FlagsInHelp", "%s: %s is not in `%s --help`" % (where, flag, current.name))
            else:
                self.ctx.info("%s: %s %s" % (where, current.name, flag))
            if current.name in LAUNCHERS and current.help_text(self.ctx) and takes_value(current.help_text(self.ctx), flag):
                swallow = "=" not in tok

    # Flags written alone (`--data FILE`): the nearest program named before them in the block,
    # else any kolo program of the section.
    def lone_flags(self, text, where, nearest, section_programs, strict=None):
        for tok in tokenize(text):
            flag = clean_flag(tok)
            if flag is None:
                continue
            if re.match(r"^-D[a-z_]+$", flag):  # a meson option (`-Dcuda=enabled`)
                self.meson_option(flag[2:], where)
                continue
            candidates = [strict] if strict else ([nearest] if nearest else []) + [
                p for p in section_programs if p is not nearest]
            kolo_candidates = [p for p in candidates if p.kolo]
            if not strict and nearest is not None and not nearest.kolo and not kolo_candidates:
                self.ctx.info("%s: %s follows %s, not kolo's: not checked" % (where, flag, nearest.name))
                continue
            if not kolo_candidates:
                self.ctx.fail("ReadmeCheck.FlagsInHelp", "%s: %s names no program of kolo's before it" % (where, flag))
                continue
            owner = next((p for p in kolo_candidates if self.check_flag(p, flag, where)), None)
            if owner is not None:
                self.ctx.info("%s: %s %s" % (where, owner.name, flag))
                continue
            if not strict and nearest is not None and not nearest.kolo:
                self.ctx.info("%s: %s follows %s, not kolo's: not checked" % (where, flag, nearest.name))
                continue
            self.ctx.fail("ReadmeCheck.FlagsInHelp", "%s: %s is in the --help of none of %s" % (
                where, flag, ", ".join(p.name for p in kolo_candidates)))

    def meson_option(self, name, where):
        with open(os.path.join(self.ctx.root, "meson_options.txt"), encoding="utf-8") as f:
            options = re.findall(r"option\(\s*'([\w-]+)'", f.read())
        self.checked_flags += 1
        if name in options:
            self.ctx.info("%s: meson option %s" % (where, name))
        else:
            self.ctx.fail("ReadmeCheck.FlagsInHelp", "%s: -D%s is not an option in meson_options.txt" % (where, name))

    def run(self):
        by_section = {}
        blocks = list(self.blocks())
        # First pass: the programs each section names (for lone flags whose program is further off).
        for kind, section, lines in blocks:
            found = by_section.setdefault(section, [])
            texts = lines if kind == "code" else re.findall(r"`([^`]+)`", " ".join(lines))
            for t in texts:
                for tok in tokenize(t):
                    p = self.ctx.program(tok)
                    if p is not None and p not in found:
                        found.append(p)
        for kind, section, lines in blocks:
            where_base = "README.md, %s" % (section or "top")
            section_programs = by_section.get(section, [])
            if kind == "heading":
                continue
            if kind == "code":
                joined, parts = [], []
                for line in lines:  # backslash continuations
                    if line.rstrip().endswith("\\"):
                        parts.append(line.rstrip()[:-1])
                        continue
                    parts.append(line)
                    joined.append(" ".join(parts))
                    parts = []
                if parts:
                    joined.append(" ".join(parts))
                for cmd in joined:
                    if cmd.strip():
                        self.command(cmd, "%s: `%s`" % (where_base, cmd.strip()[:70]), [], from_code=True)
                continue
            body = " ".join(lines)
            for target in re.findall(r"\]\(([^)#\s]+)\)", body):  # Markdown links
                if not re.match(r"^[a-z]+://", target):
                    self.checked_paths += 1
                    if not os.path.exists(os.path.join(os.path.dirname(self.readme), target)):
                        self.ctx.fail("ReadmeCheck.PathsExist", "%s: link target %s does not exist" % (where_base, target))
            strict = None
            if kind == "table":
                header = lines[0]
                for tok in re.findall(r"[A-Za-z0-9_./-]+", header):
                    p = self.ctx.program(tok)
                    if p is not None and p.kolo:
                        strict = p
            nearest = None
            for span in re.findall(r"`([^`]+)`", body):
                where = "%s: `%s`" % (where_base, span[:70])
                toks = tokenize(span)
                if not toks:
                    continue
                if clean_flag(toks[0]) is not None:
                    self.lone_flags(span, where, nearest, section_programs, strict)
                    for tok in toks:
                        self.check_path(tok)
                    continue
                mentions = []
                self.command(span, where, mentions)
                if mentions:
                    nearest = mentions[-1]

    def kolo_variables(self):
        with open(os.path.join(self.ctx.root, "common/config.cpp"), encoding="utf-8") as f:
            table = set(re.findall(r'\{\s*"(KOLO_[A-Z0-9_]+)"\s*,', f.read()))
        if len(table) < 10:
            self.ctx.fail("ReadmeCheck.KoloVariablesExist", "common/config.cpp: found no tunables table")
            return 0
        env_md = ""
        path = os.path.join(self.ctx.root, "docs/ENVIRONMENT.md")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                env_md = f.read()
        names = sorted(set(re.findall(r"\bKOLO_[A-Z0-9_]*[A-Z0-9]\b", self.text)))
        for name in names:
            if name in table:
                self.ctx.info("%s: in the tunables table" % name)
                continue
            documented = re.search(r"^\|\s*`" + re.escape(name) + r"`", env_md, re.M) is not None
            if documented and self.read_by_code(name):
                self.ctx.info("%s: a program's variable (docs/ENVIRONMENT.md, read by the code)" % name)
                continue
            self.ctx.fail("ReadmeCheck.KoloVariablesExist",
                          "README.md names %s, which is not in the tunables table (common/config.cpp)%s" % (
                              name, "" if documented else " nor a row of docs/ENVIRONMENT.md"))
        return len(names)

    def read_by_code(self, name):
        for top in ("src", "common", "tools", "bench", "scripts", "tests", "python", "examples", "transports", "kernels",
                    ".ci"):
            for dirpath, _, filenames in os.walk(os.path.join(self.ctx.root, top)):
                if os.path.relpath(dirpath, self.ctx.root).startswith("tests/docs"):
                    continue
                for f in filenames:
                    if not f.endswith((".cpp", ".hpp", ".cu", ".py", ".sh", ".build")) and "." in f:
                        continue
                    try:
                        with open(os.path.join(dirpath, f), encoding="utf-8", errors="replace") as fh:
                            if name in fh.read():
                                return True
                    except OSError:
                        pass
        return False

    def layout(self):
        try:
            files = subprocess.run(["git", "-C", self.ctx.root, "ls-files"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, check=True).stdout.split("\n")
        except (OSError, subprocess.CalledProcessError):
            self.ctx.notes.append("not a git checkout: the Layout check is skipped")
            return 0
        tracked = set()
        for f in files:
            parts = f.split("/")
            if len(parts) >= 2:
                tracked.add(parts[0])
            if len(parts) >= 3:
                tracked.add(parts[0] + "/" + parts[1])
        m = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", self.text, re.M | re.S)
        if not m:
            self.ctx.fail("ReadmeCheck.LayoutListsFolders", "README.md has no \"## Layout\" section")
            return 0
        listed = set()
        for item in re.split(r"^- ", m.group(1), flags=re.M)[1:]:
            spans = [s for s in re.findall(r"`([^`]+)`", item) if s.endswith("/")]
            if not spans:
                continue
            top = spans[0].strip("/")
            parts = top.split("/")
            listed.add(parts[0])
            if len(parts) > 1:
                listed.add("/".join(parts[:2]))
            for sub in spans[1:]:
                sub = sub.strip("/")
                listed.add(sub if sub.split("/")[0] == parts[0] else top + "/" + sub)
        for d in sorted(tracked - listed):
            self.ctx.fail("ReadmeCheck.LayoutListsFolders", "the Layout does not name %s/" % d)
        for d in sorted(listed):
            if not os.path.isdir(os.path.join(self.ctx.root, d)):
                self.ctx.fail("ReadmeCheck.LayoutListsFolders", "the Layout names %s/, which does not exist" % d)
        return len(tracked)


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    verbose = "-v" in sys.argv[1:]
    readme = None
    if "--readme" in args:
        i = args.index("--readme")
        readme = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__)
        return 2
    root, build = (os.path.abspath(a) for a in args)
    ctx = Context(root, build, verbose)
    checker = Checker(ctx, readme or os.path.join(root, "README.md"))
    checker.run()
    nvars = checker.kolo_variables()
    nfolders = checker.layout()
    for note in sorted(set(ctx.notes)):
        print("[   NOTE   ] " + note)
    counts = {"ReadmeCheck.PathsExist": "%d paths" % checker.checked_paths,
              "ReadmeCheck.FlagsInHelp": "%d flags" % checker.checked_flags,
              "ReadmeCheck.KoloVariablesExist": "%d variables" % nvars,
              "ReadmeCheck.LayoutListsFolders": "%d tracked folders" % nfolders}
    passed = 0
    for case, what in counts.items():
        if case in ctx.failures:
            for f in ctx.failures[case]:
                print("[  FAILED  ] %s: %s" % (case, f))
        else:
            passed += 1
            print("[       OK ] %s (%s)" % (case, what))
    # Nothing checked is a broken checker, not a clean README.
    if checker.checked_flags < 20 or checker.checked_paths < 5:
        ctx.failures.setdefault("ReadmeCheck.Sanity", []).append("too little found to check")
        print("[  FAILED  ] ReadmeCheck.Sanity: only %d flags and %d paths found in %s"
              % (checker.checked_flags, checker.checked_paths, checker.readme))
    print("[  PASSED  ] %d tests." % passed)
    if ctx.failures:
        print("[  FAILED  ] %d tests, listed below:" % len(ctx.failures))
        for case in ctx.failures:
            print("[  FAILED  ] %s" % case)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
