#!/usr/bin/env bash
# Checks nix/ with Nix alone, offline: every .nix file (and every nix block of the README) is
# parsed by Nix's own parser, nix/module.nix is evaluated against good configurations, with
# checks on the units, environment, MCP configuration, users and package it generates, and
# against bad ones, each of which must fail with its own message. Ends with `N passed, N failed`
# and exits non-zero if anything failed.
#
#   nix/tests/check.sh                                  needs nix-instantiate and jq
#   HIVE_NIX_LIB=/path/to/nixpkgs/lib nix/tests/check.sh   the same checks with nixpkgs' lib
#   CHECK_FAIL_FAST=1 nix/tests/check.sh                 stop at the first failure
#
# The module is evaluated by nix/tests/eval.nix with the project's own minilib.nix (nixpkgs
# cannot be fetched here), typed stand-ins for the NixOS options it sets (nixos.nix) and a
# stand-in nixpkgs (pkgs.nix): see ../../README.md, "NixOS", for what this does not cover.
set -uo pipefail

tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nixdir=$(dirname "$tests")
repo=$(dirname "$nixdir")

# shellcheck source=common.sh
. "$tests/common.sh"
need check.sh "nix-bin jq" nix-instantiate jq

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
pass() {
    passed=$((passed + 1))
    printf 'ok    %s\n' "$1"
}
fail() {
    failed=$((failed + 1))
    printf 'FAIL  %s\n' "$1"
    if [ $# -gt 1 ] && [ -n "$2" ]; then
        printf '%s\n' "$2" | head -n 25 | sed 's/^/      /'
    fi
    if [ -n "${CHECK_FAIL_FAST:-}" ]; then
        echo "$passed passed, $failed failed (stopped at the first failure: CHECK_FAIL_FAST)"
        exit 1
    fi
}

if [ -n "${HIVE_NIX_LIB:-}" ]; then
    # Nix before 2.14 lacks builtins.readFileType, which nixpkgs' lib.fileset reads files with:
    # with-readfiletype.nix lends it one.
    lib_expr="import $(nixpath "$tests/with-readfiletype.nix") $(nixpath "$HIVE_NIX_LIB")"
    echo "# with the lib at $HIVE_NIX_LIB ($(cat "$HIVE_NIX_LIB/.version" 2>/dev/null || echo 'no .version'))"
else
    lib_expr="import $(nixpath "$tests/minilib.nix")"
    echo "# with the project's stand-in lib, nix/tests/minilib.nix (HIVE_NIX_LIB=<nixpkgs>/lib for nixpkgs' own)"
fi

# eval_case NAME CASE [ARG...]: evaluate the module with the configuration module CASE (a Nix
# expression) and nix-instantiate's ARGs; the output goes to $work/NAME.json, the errors to
# $work/NAME.err.
eval_case() {
    local name=$1 case=$2
    shift 2
    nix-instantiate --readonly-mode --eval --strict --json "$tests/eval.nix" \
        --arg case "$case" --arg lib "$lib_expr" "$@" >"$work/$name.json" 2>"$work/$name.err"
}

# evaluate NAME CASE: a configuration that must evaluate.
evaluate() {
    if eval_case "$@"; then
        pass "evaluates: $1"
    else
        rm -f "$work/$1.json"
        fail "evaluates: $1" "$(cat "$work/$1.err")"
    fi
}

# jq definitions for the expectations: `argv` reads an ExecStart= line as systemd splits it
# (the module writes each word as a JSON string with % and $ doubled), `unit_env` an
# Environment= value as systemd reads it (% doubled).
jq_defs='
def words: [scan("\"(?:[^\"\\\\]|\\\\.)*\"")];
def unescape: gsub("%%"; "%") | gsub("\\$\\$"; "$");
def argv: words | map(fromjson | unescape);
def only_words: gsub("\"(?:[^\"\\\\]|\\\\.)*\""; "") | test("^ *$");
def unit_env: gsub("%%"; "%");
def pkg: .package.path;
'

# expect NAME DESCRIPTION FILTER: FILTER (jq) is true of what NAME evaluated to.
expect() {
    local name=$1 what=$2 filter=$3 out
    if [ ! -f "$work/$name.json" ]; then
        fail "$name: $what" "(not evaluated)"
        return
    fi
    if out=$(jq -e "$jq_defs . as \$root | $filter" "$work/$name.json" 2>&1); then
        pass "$name: $what"
    else
        fail "$name: $what" "jq: $filter => $out"
    fi
}

# reject WHAT CASE MESSAGE [ARG...]: the configuration CASE must fail to evaluate, saying MESSAGE.
reject() {
    local what=$1 case=$2 message=$3 err
    shift 3
    if eval_case reject "$case" "$@"; then
        fail "rejects: $what" "it evaluated; expected an error saying: $message"
    elif err=$(cat "$work/reject.err") && grep -qF -- "$message" <<<"$err"; then
        pass "rejects: $what"
    else
        fail "rejects: $what" "expected: $message
got: $err"
    fi
}

# -- 1. every .nix file parses (and its names resolve: Nix's parser checks them) -------------

while IFS= read -r file; do
    if err=$(nix-instantiate --parse "$file" 2>&1 >/dev/null); then
        pass "parses: ${file#"$repo"/}"
    else
        fail "parses: ${file#"$repo"/}" "$err"
    fi
done < <(find "$nixdir" -name '*.nix' | sort)

# The README's nix blocks parse too, and one of them is nix/examples/two-agents.nix verbatim.
awk -v dir="$work" '
    /^```nix[[:space:]]*$/ { inside = 1; n++; file = dir "/readme-" n ".nix"; printf "" > file; next }
    /^```[[:space:]]*$/ { inside = 0; next }
    inside { print >> file }
' "$repo/README.md"
example_in_readme=no
for block in "$work"/readme-*.nix; do
    [ -e "$block" ] || continue
    label="parses: README.md nix block ${block##*/readme-}"
    if err=$(nix-instantiate --parse "$block" 2>&1 >/dev/null); then pass "$label"; else fail "$label" "$err"; fi
    if cmp -s "$block" "$nixdir/examples/two-agents.nix"; then example_in_readme=yes; fi
done
if [ "$example_in_readme" = yes ]; then
    pass "README.md shows nix/examples/two-agents.nix as it is"
else
    fail "README.md shows nix/examples/two-agents.nix as it is" "no nix block of README.md is that file"
fi

# -- 2. the README's example: two agents, one claude, one ACP ----------------------------------

# The example imports the module from a checkout beside configuration.nix; eval.nix imports it.
evaluate example "args: removeAttrs (import $(nixpath "$nixdir/examples/two-agents.nix") args) [ \"imports\" ]"
if grep -qE '^\s*imports = \[ \./hive/nix/module\.nix \];' "$nixdir/examples/two-agents.nix"; then
    pass "example: imports hive's nix/module.nix"
else
    fail "example: imports hive's nix/module.nix" "no 'imports = [ ./hive/nix/module.nix ];' line"
fi

expect example "two units per agent, and nothing else" \
    '.services | keys == ["hive-agent-reviewer", "hive-agent-scribe", "hive-bash-daemon-reviewer", "hive-bash-daemon-scribe"]'

for a in scribe reviewer; do
    d=".services[\"hive-bash-daemon-$a\"]"
    g=".services[\"hive-agent-$a\"]"
    expect example "$a: the daemon unit runs hive-bash-daemon of the package, and only that" \
        "$d.serviceConfig.ExecStart | only_words and (argv == [\"\\(\$root | pkg)/bin/hive-bash-daemon\"])"
    expect example "$a: the daemon unit is Type=notify (the daemon says READY=1)" "$d.serviceConfig.Type == \"notify\""
    expect example "$a: the daemon unit stops the daemon alone (KillMode=process), with SIGINT" \
        "$d.serviceConfig.KillMode == \"process\" and $d.serviceConfig.KillSignal == \"SIGINT\""
    expect example "$a: the daemon unit delegates its cgroup subtree (a cgroup per task)" \
        "$d.serviceConfig.Delegate == true"
    expect example "$a: the agent unit runs hive-agent of the package with its MCP config" \
        "$g.serviceConfig.ExecStart | only_words and (argv[0:3] == [\"\\(\$root | pkg)/bin/hive-agent\", \"--mcp-config\", \"/etc/hyperhive/$a/mcp.json\"])"
    expect example "$a: the agent unit requires the daemon unit and starts after it" \
        "$g.requires == [\"hive-bash-daemon-$a.service\"] and $g.after == [\"hive-bash-daemon-$a.service\"]"
    expect example "$a: the agent unit is Type=notify and stops with SIGINT to hive-agent" \
        "$g.serviceConfig.Type == \"notify\" and $g.serviceConfig.KillSignal == \"SIGINT\" and $g.serviceConfig.KillMode == \"mixed\""
    expect example "$a: both units run as the agent's user, started at boot" \
        "[$d, $g] | all(.serviceConfig.User == \"hive-$a\" and .wantedBy == [\"multi-user.target\"])"
    expect example "$a: both units have the state dir and the sockets under /run/hyperhive/$a" \
        "[$d, $g] | all(.environment | .HIVE_STATE_DIR == \"/var/lib/hyperhive/$a\" and .HIVE_AGENT_SOCKET == \"/run/hyperhive/$a/agent.sock\" and .HIVE_BASH_SOCKET == \"/run/hyperhive/$a/bash.sock\")"
    expect example "$a: both units work in the state dir (tasks too), files private (UMask 0077)" \
        "([$d, $g] | all(.serviceConfig.WorkingDirectory == \"/var/lib/hyperhive/$a\" and .serviceConfig.UMask == \"0077\")) and $d.environment.HIVE_BASH_WORKDIR == \"/var/lib/hyperhive/$a\""
    expect example "$a: both units restart on failure" \
        "[$d, $g] | all(.serviceConfig.Restart == \"on-failure\")"
    expect example "$a: both units hide other users' processes (ProtectProc=invisible)" \
        "[$d, $g] | all(.serviceConfig.ProtectProc == \"invisible\")"
    expect example "$a: both units have hive, bash and util-linux (unshare) on their PATH" \
        "[$d, $g] | all(.path[0] == (\$root | pkg) and (.path[1] | test(\"^/nix/store/[^/]+-bash-[^/]+\$\")) and (.path[2] | test(\"^/nix/store/[^/]+-util-linux-[^/]+\$\")))"
    expect example "$a: the socket dir and the state dir are made 0700 for the agent's user" \
        ".tmpfiles | index([\"d /run/hyperhive/$a 0700 hive-$a - -\"]) != null and index([\"d /var/lib/hyperhive/$a 0700 hive-$a - -\"]) != null"
    expect example "$a: its user is made: a system user in group hyperhive, at home in the state dir" \
        ".users[\"hive-$a\"] | .isSystemUser and .group == \"hyperhive\" and .home == \"/var/lib/hyperhive/$a\""
    expect example "$a: the MCP config has bash: the relay of the package on the agent's bash socket, every tool allowed" \
        ".etc[\"hyperhive/$a/mcp.json\"] | fromjson | .mcpServers.bash == {type: \"stdio\", command: \"\\(\$root | pkg)/bin/hive-bash-mcp\", args: [\"--socket\", \"/run/hyperhive/$a/bash.sock\"], env: {}, allowedTools: [\"*\"]}"
    expect example "$a: a change of the MCP config restarts the agent unit" \
        "$g.restartTriggers == [.etc[\"hyperhive/$a/mcp.json\"]]"
done
expect example "the hyperhive group is made" '.groups == ["hyperhive"]'
expect example "the runtime dir's parent is made" '.tmpfiles[0] == "d /run/hyperhive 0755 root root -"'

s='.services["hive-agent-scribe"]'
expect example "scribe: the claude runtime, and no ACP variables" \
    "$s.environment | .HIVE_RUNTIME == \"claude\" and (.HIVE_CLAUDE_COMMAND | test(\"^/nix/store/[^/]+-claude-code-[^/]+/bin/claude\$\")) and (keys | map(select(startswith(\"HIVE_ACP\"))) == [])"
expect example "scribe: model, effort, idle timeout, watermark, system prompt and subagents as hive-agent's flags" \
    "$s.serviceConfig.ExecStart | argv[3:] == [\"--model\", \"sonnet\", \"--effort\", \"high\", \"--idle-timeout\", \"600\", \"--compact-at\", \"0.8\", \"--system-prompt\", \"You keep the project's documentation up to date.\", \"--subagents\"]"
expect example "an agent that sets no permission policy gets hive-agent's default, as HIVE_PERMISSION" \
    '[.services["hive-agent-scribe", "hive-agent-reviewer"].environment.HIVE_PERMISSION] == ["default", "default"]'
expect example "scribe: the environment file is read (secrets stay out of the store)" \
    "$s.serviceConfig.EnvironmentFile == \"/run/secrets/hive-scribe.env\""
expect example "reviewer: its environment file, then its telemetry's; its bash daemon reads only the telemetry's" \
    '.services["hive-agent-reviewer"].serviceConfig.EnvironmentFile == ["/run/secrets/hive-reviewer.env", "/etc/hive/otel.env"] and .services["hive-bash-daemon-reviewer"].serviceConfig.EnvironmentFile == "/etc/hive/otel.env" and (.services["hive-bash-daemon-scribe"].serviceConfig | has("EnvironmentFile") | not)'
expect example "scribe: the configured packages are on the PATH" \
    "$s.path | map(select(test(\"git-|ripgrep-\"))) | length == 2"
expect example "scribe: the MCP config has github as configured, and bash" \
    '.etc["hyperhive/scribe/mcp.json"] | fromjson | .mcpServers | (keys == ["bash", "github"]) and (.github.command | test("^/nix/store/[^/]+-github-mcp-server-[^/]+/bin/github-mcp-server$")) and .github == {type: "stdio", command: .github.command, args: ["stdio"], env: {GITHUB_TOOLSETS: "repos,issues"}, allowedTools: ["get_issue", "list_issues"]}'

r='.services["hive-agent-reviewer"]'
expect example "reviewer: the acp runtime with HIVE_ACP_COMMAND, and no claude variable" \
    "$r.environment | .HIVE_RUNTIME == \"acp\" and (.HIVE_ACP_COMMAND | unit_env | test(\"^/nix/store/[^/]+-nodejs-22[^/]*/bin/npx\$\")) and (has(\"HIVE_CLAUDE_COMMAND\") | not)"
expect example "reviewer: HIVE_ACP_ARGS is the JSON list of acp.args" \
    "$r.environment.HIVE_ACP_ARGS | unit_env | fromjson == [\"--yes\", \"@agentclientprotocol/claude-agent-acp@0.101.0\"]"
expect example "reviewer: HIVE_ACP_ENV is the JSON object of acp.env" \
    "$r.environment.HIVE_ACP_ENV | unit_env | fromjson == {DISABLE_AUTOUPDATER: \"1\"}"
expect example "reviewer: only the flags it sets (no effort, no subagents)" \
    "$r.serviceConfig.ExecStart | argv[3:] == [\"--model\", \"opus\", \"--idle-timeout\", \"900\"]"
expect example "reviewer: the MCP config has bash alone" \
    '.etc["hyperhive/reviewer/mcp.json"] | fromjson | .mcpServers | keys == ["bash"]'

# -- 3. the package: name, version and dependencies from pyproject.toml -----------------------

nix-instantiate --eval --strict --json -E "builtins.fromTOML (builtins.readFile $(nixpath "$repo/pyproject.toml"))" \
    >"$work/pyproject.json" 2>"$work/pyproject.err" || fail "reads pyproject.toml" "$(cat "$work/pyproject.err")"
jq_defs="$jq_defs
def pyproject_deps: [(.dependencies + .[\"optional-dependencies\"].otel)[] | capture(\"^\\\\s*(?<n>[A-Za-z0-9][A-Za-z0-9._-]*)\").n | ascii_downcase | gsub(\"[._]\"; \"-\")];
"
jq_file_args=(--slurpfile pyproject "$work/pyproject.json")
expect_pyproject() {
    local what=$1 filter=$2 out
    if [ ! -f "$work/example.json" ]; then
        fail "package: $what" "(not evaluated)"
    elif out=$(jq -e "${jq_file_args[@]}" "$jq_defs (\$pyproject[0].project) as \$p | $filter" "$work/example.json" 2>&1); then
        pass "package: $what"
    else
        fail "package: $what" "jq: $filter => $out"
    fi
}
expect_pyproject "named and versioned as pyproject.toml says" \
    '.package.pname == $p.name and .package.version == $p.version and .package.name == "\($p.name)-\($p.version)"'
expect_pyproject "every pyproject.toml dependency and the otel extra, by name" \
    '(.package.dependencies | map(.pname)) == ($p | pyproject_deps) and (.package.dependencies | length) > 0'

# Where nixpkgs (2026-06) has too old a version, the package builds the PyPI sdist pinned in
# nix/pypi.nix (nix/tests/pypi-pins.py checks the pins against PyPI itself).
nix-instantiate --eval --strict --json "$nixdir/pypi.nix" >"$work/pins.json" 2>"$work/pins.err" ||
    fail "reads nix/pypi.nix" "$(cat "$work/pins.err")"
jq_file_args+=(--slurpfile pins "$work/pins.json")
expect_pyproject "with nixpkgs of 2026-06: mcp and agent-client-protocol from PyPI, with what mcp 2.3 needs" \
    '.package.fromPypi == ["agent-client-protocol", "httpcore2", "httpx2", "mcp", "mcp-types"]
     and ([.package.dependencies[] | select(.from == "pypi") | .pname] == ["mcp", "agent-client-protocol"])
     and ([.package.pypi[] | .dependencies[] | select(.pname == "httpx2" or .pname == "mcp-types" or .pname == "httpcore2") | .from] | unique) == ["pypi"]'
expect_pyproject "each PyPI package from its sdist by the pinned hash, built as the pin says" \
    '.package.pypi | length > 0 and all(.[]; . as $b | $pins[0][$b.pname] as $pin
        | $b.version == $pin.version and $b.hash == $pin.hash
        and ($b.url | endswith("/\($pin.sdist)/\($pin.sdist)-\($pin.version).tar.gz"))
        and $b."build-system" == $pin."build-system" and $b.pythonImportsCheck == [$pin.imports]
        and ($b.dependencies | map(.pname) | unique) == ($pin.requires | map(capture("^(?<n>[A-Za-z0-9._-]+)").n | ascii_downcase | gsub("[._]"; "-")) + (if any($pin.requires[]; startswith("pyjwt[crypto]")) then ["cryptography"] else [] end) | unique))'

# The same choice made against other nixpkgs: a newer one takes all from nixpkgs; one that has
# no version meeting a requirement (of hive's or of a pinned package's) stops with its name.
versions_with() {
    nix-instantiate --eval --strict --json -E "(import $(nixpath "$tests/pkgs.nix") { lib = import $(nixpath "$tests/minilib.nix"); }).pythonVersions" 2>/dev/null |
        jq -c "$1"
}
newer=$(versions_with '. + {mcp: "2.4.1", "mcp-types": "2.4.1", httpx2: "2.20.0", httpcore2: "2.20.0", "agent-client-protocol": "0.12.3"}')
evaluate newer-nixpkgs "args: removeAttrs (import $(nixpath "$nixdir/examples/two-agents.nix") args) [ \"imports\" ]" \
    --arg pythonVersions "builtins.fromJSON ''$newer''"
expect newer-nixpkgs "package: with a nixpkgs that has them all, nothing from PyPI" \
    '.package.fromPypi == [] and .package.pypi == [] and all(.package.dependencies[]; .from == "nixpkgs")'
old_h11=$(versions_with '. + {h11: "0.14.0"}')
reject "package: a nixpkgs whose h11 is older than httpcore2 2.17 needs, naming it" \
    "args: removeAttrs (import $(nixpath "$nixdir/examples/two-agents.nix") args) [ \"imports\" ]" \
    '"h11>=0.16" (h11 0.14.0 is what there is)' --arg pythonVersions "builtins.fromJSON ''$old_h11''"
no_acp=$(versions_with 'del(."agent-client-protocol") | . + {mcp: "2.4.1", "mcp-types": "2.4.1", httpx2: "2.20.0", httpcore2: "2.20.0"}')
evaluate no-acp "args: removeAttrs (import $(nixpath "$nixdir/examples/two-agents.nix") args) [ \"imports\" ]" \
    --arg pythonVersions "builtins.fromJSON ''$no_acp''"
expect no-acp "package: with a nixpkgs that has no agent-client-protocol, that alone from PyPI" \
    '.package.fromPypi == ["agent-client-protocol"]'

# nix/requirements.nix reads and compares versions as PEP 440 does (what the choice rests on).
if out=$(nix-instantiate --eval --strict --json -E "let r = import $(nixpath "$nixdir/requirements.nix"); m = v: s: r.satisfiedBy v (r.parse s); in [
    (r.parse \"pyjwt[crypto] >=2.10.1\" == { name = \"pyjwt\"; extras = [ \"crypto\" ]; specifiers = [ \">=2.10.1\" ]; text = \"pyjwt[crypto] >=2.10.1\"; })
    ((r.parse \"Foo_Bar.baz>=1; python_version < '3.14'\").name == \"foo-bar-baz\")
    (map (v: m v \"mcp>=2.3,<3\") [ \"2.2.9\" \"2.3\" \"2.3.0\" \"2.10.1\" \"3\" \"3.0.0\" ] == [ false true true true false false ])
    (map (v: m v \"x==2.17.0\") [ \"2.17\" \"2.17.0\" \"2.17.1\" ] == [ true true false ])
    (map (v: m v \"x==2.*\") [ \"2\" \"2.9\" \"20.1\" \"3.0\" ] == [ true true false false ])
    (map (v: m v \"x~=1.4.2\") [ \"1.4.1\" \"1.4.2\" \"1.4.9\" \"1.5.0\" ] == [ false true true false ])
    (map (v: m v \"x!=1.5,>1.4\") [ \"1.4\" \"1.4.1\" \"1.5\" \"1.6\" ] == [ false true false true ])
    (m null \"x>=1\" == false)
    (m \"0.0.32\" \"x>=0.0.9\")
  ]" 2>&1) && [ "$out" = "[true,true,true,true,true,true,true,true,true]" ]; then
    pass "package: nix/requirements.nix reads requirements and compares versions as PEP 440 does"
else
    fail "package: nix/requirements.nix reads requirements and compares versions as PEP 440 does" "$out"
fi

# What the package is built from, against what git tracks there (else what is on disk).
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$repo" ls-files -- pyproject.toml setup.py README.md hive
else
    (cd "$repo" && find pyproject.toml setup.py README.md hive -type f ! -path '*/__pycache__/*' ! -name '*.so')
fi | jq -R . | jq -s 'sort' >"$work/tracked.json"
jq_file_args+=(--slurpfile tracked "$work/tracked.json")
expect_pyproject "built from pyproject.toml, setup.py, README.md and the files of hive/ git tracks, and nothing else" \
    '(.package.src | sort) == $tracked[0] and (.package.src | any(test("__pycache__|\\.pyc$")) | not) and (.package.src | length) > 50'

# -- 4. the rest of the settings ------------------------------------------------------------------

evaluate none '{ }'
expect none "no agents: no units, files, users or directories" \
    '.services == {} and .etc == {} and .users == {} and .groups == [] and .tmpfiles == []'

evaluate disabled '{ lib, ... }: {
  services.hyperhive.agents.off = { enable = false; runtime = "acp"; acp.command = "/bin/agent"; };
  services.hyperhive.agents.maybe = lib.mkIf false { };
}'
expect disabled "a disabled agent, and one defined under a false mkIf, have no units" \
    '.services == {} and .etc == {} and .users == {}'

evaluate plain "$case_plain"
p='.services["hive-agent-p"]'
expect plain "with nothing set, hive-agent gets no flag but its MCP config, and no environment file" \
    "($p.serviceConfig.ExecStart | argv | length) == 3 and ($p.serviceConfig | has(\"EnvironmentFile\") | not)"
expect plain "the claude runtime runs 'claude' from the PATH by default" \
    "$p.environment.HIVE_CLAUDE_COMMAND == \"claude\""
expect plain "a user of one's own is used, and not made" \
    "$p.serviceConfig.User == \"ops\" and .users == {} and .groups == []"
expect plain "the working directory is where the units and the tasks run" \
    "$p.serviceConfig.WorkingDirectory == \"/srv/work\" and .services[\"hive-bash-daemon-p\"].environment.HIVE_BASH_WORKDIR == \"/srv/work\""

evaluate rundir "$case_rundir"
expect rundir "the sockets follow runtimeDir" \
    '.services["hive-agent-q"].environment.HIVE_AGENT_SOCKET == "/run/hive/q/agent.sock" and .tmpfiles[0:2] == ["d /run/hive 0755 root root -", "d /run/hive/q 0700 hive-q - -"]'

evaluate permission "$case_permission"
expect permission "the permission policy reaches hive-agent as HIVE_PERMISSION" \
    '.services["hive-agent-a"].environment.HIVE_PERMISSION == "allow" and .services["hive-agent-b"].environment.HIVE_PERMISSION == "accept_edits"'
expect permission "the policy is hive-agent's alone: not a flag, not the daemon's" \
    '(.services["hive-agent-a"].serviceConfig.ExecStart | argv | length) == 3 and (.services["hive-bash-daemon-a"].environment | has("HIVE_PERMISSION") | not)'

# Values with what systemd would read as a specifier (%), a variable ($), quotes and newlines
# reach the programs as they were written.
evaluate escapes "$case_escapes"
e='.services["hive-agent-e"]'
expect escapes "ExecStart holds no bare % (a specifier to systemd)" \
    "$e.serviceConfig.ExecStart | gsub(\"%%\"; \"\") | test(\"%\") | not"
expect escapes "ExecStart holds no bare \$ (a variable to systemd)" \
    "$e.serviceConfig.ExecStart | gsub(\"\\\\$\\\\$\"; \"\") | test(\"[\$]\") | not"
expect escapes "the model and system prompt reach hive-agent as written" \
    "$e.serviceConfig.ExecStart | argv[3:] == [\"--model\", \"m%i\$x\", \"--system-prompt\", \"Be \\\"kind\\\" to 100% of\\n\$USERS.\"]"
expect escapes "Environment= values hold no bare %" \
    "[$e.environment[]] | all(gsub(\"%%\"; \"\") | test(\"%\") | not)"
expect escapes "HIVE_ACP_COMMAND, HIVE_ACP_ARGS and HIVE_ACP_ENV reach the program as written" \
    "$e.environment | (.HIVE_ACP_COMMAND | unit_env) == \"/opt/agents/run%n\" and (.HIVE_ACP_ARGS | unit_env | fromjson) == [\"--home=%h\", \"\$HOME\", \"\${USER}\", \"say \\\"hi\\\"\", \"two\\nlines\", \"back\\\\slash\"] and (.HIVE_ACP_ENV | unit_env | fromjson) == {PERCENT: \"100%\", DOLLAR: \"\$PATH\"}"

evaluate mcp "$case_mcp"
expect mcp "an extra server gets the defaults: no args, no env, no tool allowed" \
    '.etc["hyperhive/m/mcp.json"] | fromjson | .mcpServers.files == {type: "stdio", command: "/bin/files-mcp", args: [], env: {}, allowedTools: []}'
expect mcp "every server is in the MCP config, bash included" \
    '.etc["hyperhive/m/mcp.json"] | fromjson | .mcpServers | keys == ["bash", "files", "web"] and .web.allowedTools == ["*"] and .bash.allowedTools == ["*"]'
expect mcp "subagents = true is hive-agent's --subagents" \
    '.services["hive-agent-m"].serviceConfig.ExecStart | argv[-1] == "--subagents"'

# -- 5. configurations that cannot work ------------------------------------------------------------

reject "an acp agent without a command" \
    '{ services.hyperhive.agents.x.runtime = "acp"; }' \
    'services.hyperhive.agents."x": runtime is "acp" but acp.command is not set'
reject "an acp agent with an empty command" \
    '{ services.hyperhive.agents.x = { runtime = "acp"; acp.command = ""; }; }' \
    'runtime is "acp" but acp.command is not set'
reject "a name with a space (not a unit name)" \
    '{ services.hyperhive.agents."my agent" = { }; }' \
    '"my agent" cannot be an agent name'
reject "a name with a slash (a path)" \
    '{ services.hyperhive.agents."a/b" = { }; }' \
    '"a/b" cannot be an agent name'
reject "a name that starts with a dot" \
    '{ services.hyperhive.agents.".hidden" = { }; }' \
    '".hidden" cannot be an agent name'
reject "a name of 65 characters (the socket path would be too long)" \
    "{ services.hyperhive.agents.\"$(printf 'a%.0s' {1..65})\" = { }; }" \
    'cannot be an agent name'
reject "two agents on one state dir" \
    '{ services.hyperhive.agents = { a.stateDir = "/srv/s"; b.stateDir = "/srv/s/"; }; }' \
    'services.hyperhive.agents: "a" and "b" share the state dir /srv/s'
reject "an agent on another agent's default state dir" \
    '{ services.hyperhive.agents = { a = { }; b.stateDir = "/var/lib/hyperhive/a"; }; }' \
    'share the state dir /var/lib/hyperhive/a'
reject "a relative state dir" \
    '{ services.hyperhive.agents.a.stateDir = "var/lib/a"; }' \
    'services.hyperhive.agents."a".stateDir: "var/lib/a" must be an absolute path'
reject "a state dir with a space" \
    '{ services.hyperhive.agents.a.stateDir = "/srv/my agent"; }' \
    'must be an absolute path without spaces, %'
reject "a runtime that does not exist" \
    '{ services.hyperhive.agents.a.runtime = "gemini"; }' \
    "A definition for option \`services.hyperhive.agents.a.runtime' is not of type"
reject "a misspelt option" \
    '{ services.hyperhive.agents.a.modle = "sonnet"; }' \
    "The option \`services.hyperhive.agents.a.modle' does not exist"
reject "a permission policy hive-agent does not have (claude's spelling)" \
    '{ services.hyperhive.agents.a.permission = "acceptEdits"; }' \
    "A definition for option \`services.hyperhive.agents.a.permission' is not of type"
reject "acp.args as a string" \
    '{ services.hyperhive.agents.a = { runtime = "acp"; acp.command = "/bin/x"; acp.args = "--flag"; }; }' \
    "A definition for option \`services.hyperhive.agents.a.acp.args' is not of type"
reject "an idle timeout of 0" \
    '{ services.hyperhive.agents.a.idleTimeout = 0; }' \
    "A definition for option \`services.hyperhive.agents.a.idleTimeout' is not of type"
reject "a watermark above 1" \
    '{ services.hyperhive.agents.a.compactAt = 1.5; }' \
    'services.hyperhive.agents."a".compactAt: 1.5 is not a fraction of the context window'
reject "an MCP server named bash (hive's own)" \
    '{ services.hyperhive.agents.a.extraMcpServers.bash = { command = "/bin/sh"; allowedTools = [ "*" ]; }; }' \
    'services.hyperhive.agents."a".extraMcpServers."bash": the name "bash" is hive'"'"'s own'
reject "an MCP server named hyperhive (hive-agent's tools)" \
    '{ services.hyperhive.agents.a.extraMcpServers.hyperhive.command = "/bin/x"; }' \
    'the name "hyperhive" is hive'"'"'s own'
reject "an MCP server without a command" \
    '{ services.hyperhive.agents.a.extraMcpServers.files.args = [ "x" ]; }' \
    "The option \`services.hyperhive.agents.a.extraMcpServers.files.command' was accessed but has no value defined"
reject "an MCP server name with a space" \
    '{ services.hyperhive.agents.a.extraMcpServers."my files".command = "/bin/x"; }' \
    'extraMcpServers."my files": an MCP server'"'"'s name becomes part of its tools'"'"' names'
evaluate web '{ services.hyperhive.agents.w1 = { }; services.hyperhive.agents.w2.stateDir = "/srv/w2"; services.hyperhive.web = { enable = true; tokenFile = "/run/secrets/web-token"; }; }'
w='.services["hive-web"]'
expect web "hive web runs as a unit over every agent's state dir, the token from its file" \
    "($w.serviceConfig.ExecStart | argv) == [\"\\(pkg)/bin/hive\", \"web\", \"--listen\", \"127.0.0.1:8470\", \"/var/lib/hyperhive/w1\", \"/srv/w2\"] and $w.environment.HIVE_WEB_TOKEN_FILE == \"/run/secrets/web-token\" and $w.environment.HIVE_RUNTIME_ROOT == \"/run/hyperhive\""
expect web "hive web sees the file system read-only, stops on SIGINT" \
    "$w.serviceConfig | .ProtectSystem == \"strict\" and .KillSignal == \"SIGINT\" and .NoNewPrivileges == true"
expect plain "no hive web unless asked for" \
    '.services | has("hive-web") | not'
reject "hive web without a token file" \
    '{ services.hyperhive.web.enable = true; }' \
    'services.hyperhive.web.enable is set but web.tokenFile is not'
reject "a default user name over 32 characters" \
    "{ services.hyperhive.agents.\"$(printf 'b%.0s' {1..30})\" = { }; }" \
    'longer than 32 characters'

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
