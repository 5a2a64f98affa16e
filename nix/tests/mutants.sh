#!/usr/bin/env bash
# Shows that nix/tests/check.sh and verify-units.sh fail on a broken module: each mutant below
# breaks a copy of nix/ in one way (a syntax error, an undefined name, a wrong unit setting, a lost
# escape, a dropped assertion, a value systemd refuses, ...), and check.sh, or else
# verify-units.sh (systemd-analyze verify), run on that copy must fail. Ends with
# `N passed, N failed`, where a mutant both let through is a failure.
#
#   nix/tests/mutants.sh          needs what check.sh and verify-units.sh need
set -uo pipefail

tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nixdir=$(dirname "$tests")
repo=$(dirname "$nixdir")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each line: FILE (under nix/) ~ sed expression ~ what it breaks. One whose last field starts
# `systemd:` must be caught by verify-units.sh itself (systemd-analyze verify), whatever check.sh says.
mutants=$(
    cat <<'EOF'
module.nix~s/KillSignal = "SIGINT";/KillSignal = "SIGINT"/~a missing ;
module.nix~s/HIVE_AGENT_SOCKET = agentSocket name;/HIVE_AGENT_SOCKET = agentSockett name;/~an undefined variable
module.nix~0,/inherit (server)/s/inherit (server)/inherit (servr)/~an undefined variable in a submodule's rendering
module.nix~s/KillMode = "process";/KillMode = "control-group";/~the daemon's stop kills its tasks
module.nix~s/KillMode = "mixed";/KillMode = "mixd";/~a KillMode systemd does not know
module.nix~0,/Type = "notify";/s/Type = "notify";/Type = "simple";/~the daemon unit no longer waits for READY=1
module.nix~s/requires = \[ "\${daemonUnit name}.service" \];/requires = [ ];/~the agent unit no longer requires its daemon
module.nix~s/HIVE_ACP_ARGS = toJSON agent.acp.args;/HIVE_ACP_ARGS = concatStringsSep " " agent.acp.args;/~HIVE_ACP_ARGS not JSON
module.nix~s/HIVE_ACP_ENV = /HIVE_ACP_ENVIRONMENT = /~a misspelt variable
module.nix~s/HIVE_BASH_SOCKET = bashSocket name;/HIVE_BASH_SOCKET = agentSocket name;/~the bash socket at the agent socket's path
module.nix~s/allowedTools = \[ "\*" \];/allowedTools = [ ];/~bash without its tools allowed
module.nix~s/^      bash = {/      shell = {/~bash no longer injected under its name
module.nix~s/unitEnvValue = replaceStrings \[ "%" \] \[ "%%" \];/unitEnvValue = value: value;/~% left bare in Environment=
module.nix~s/\[ "%" "\$" \] \[ "%%" "\$\$" \]/[ "%" ] [ "%%" ]/~$ left bare in ExecStart=
module.nix~s/assertion = agent.runtime != "acp" ||/assertion = true ||/~the acp-without-command assertion dropped
module.nix~s/length names > 1/length names > 2/~two agents on one state dir let through
module.nix~s/\[A-Za-z0-9\]\[A-Za-z0-9._-\]{0,63}/.+/~any agent name let through
module.nix~s/types.nullOr types.numbers.positive/types.nullOr types.number/~an idle timeout of 0 let through
module.nix~s/UMask = "0077";/UMasks = "0077";/~a misspelt unit setting
module.nix~0,/systemd.tmpfiles.rules = \[/s/systemd.tmpfiles.rules = \[/systemd.tmpfiles.rule = [/~an undeclared NixOS option
module.nix~s/type = types.listOf types.str;/type = types.str;/~a string type where a list is defined
module.nix~s/mkIf (agents != { })/mkIf cfg.agents/~mkIf on a non-boolean
module.nix~s/"--subagents"/"--subagent"/~a flag hive-agent does not have
module.nix~s/HIVE_PERMISSION = agent.permission;/HIVE_PERMISSION = "default";/~the permission option ignored
module.nix~s/^            "accept_edits"$/            "acceptEdits"/~a permission policy hive-agent does not know
module.nix~0,/KillSignal = "SIGINT";/s/KillSignal = "SIGINT";/KillSignal = "SIGNIT";/~a signal systemd does not know
module.nix~0,/Restart = "on-failure";/s/Restart = "on-failure";/Restart = "on-failures";/~a Restart= systemd does not know
module.nix~s/Delegate = true;/Delegate = "yes please";/~systemd: a Delegate= systemd cannot read
module.nix~0,/ProtectProc = "invisible";/s/ProtectProc = "invisible";/ProtectProcess = "invisible";/~systemd: a key systemd does not know
module.nix~0,/UMask = "0077";/s/UMask = "0077";/UMask = "0o77";/~systemd: a mode systemd cannot parse
module.nix~s/ProtectSystem = "strict";/ProtectSystem = "stricter";/~systemd: a ProtectSystem= systemd does not know
module.nix~s/assertion = cfg.web.tokenFile != null;/assertion = true;/~hive web without a token let through
module.nix~0,/ProtectProc = "invisible";/s/ProtectProc = "invisible";/ProtectProc = "hidden";/~systemd: a ProtectProc= systemd does not know
package.nix~s/inherit (project) version;/version = "0.0.0";/~a version that is not pyproject.toml's
package.nix~s/^  src = /  srcs = /~srcs instead of src
package.nix~s/ || file.name == "py.typed"//~a source without hive/py.typed
package.nix~s|^    ../README.md$||~a source without README.md
package.nix~s/^  fetchPypi,$/  fetchPypi, fetchgithub,/~an argument nixpkgs' stand-in lacks
package.nix~s/dependencies = lib.unique (lib.concatMap (packagesFor python.pkgs) asked);/dependencies = [ python.pkgs.trio ];/~dependencies not from pyproject.toml
package.nix~s/available = name: python3.pkgs.\${name}.version or null;/available = name: null;/~every pin built, whatever nixpkgs has
package.nix~s/packageOverrides = final: _prev: lib.genAttrs built (buildPin final);/packageOverrides = final: _prev: { };/~the pins chosen but never built
package.nix~s/pname = pin.sdist;/pname = name;/~fetchPypi given the project's name, not the sdist's
pypi.nix~0,/version = "2.3.0";/s/version = "2.3.0";/version = "2.2.0";/~a pinned mcp older than pyproject.toml asks
pypi.nix~s/"httpcore2==2.17.0"//~a pin's requirement dropped
requirements.nix~s/order >= 0$/order > 0/~>= read as >
requirements.nix~s/if found == null then version else dropTrailingZeros/if true then version else dropTrailingZeros/~3.0 no longer equal to 3
examples/two-agents.nix~s/idleTimeout = 600;/idleTimeout = "600";/~the example changed (no longer type-checking) and the README not
EOF
)

# copy DIR: nix/ and what it reads (pyproject.toml, README.md, setup.py, hive/) under DIR.
copy() {
    mkdir -p "$1"
    cp -r "$nixdir" "$1/nix"
    cp "$repo/pyproject.toml" "$repo/README.md" "$repo/setup.py" "$1/"
    (cd "$repo" && tar -c --exclude=__pycache__ hive) | tar -x -C "$1"
}

# The copy itself must pass: each mutant's failure is then the mutation's doing.
copy "$work/baseline"
if ! "$work/baseline/nix/tests/check.sh" >"$work/baseline.out" 2>&1; then
    grep -v '^ok' "$work/baseline.out"
    echo "mutants.sh: check.sh fails on the unbroken nix/; fix that first" >&2
    exit 1
fi
if ! "$work/baseline/nix/tests/verify-units.sh" >"$work/baseline.out" 2>&1; then
    grep -v '^ok' "$work/baseline.out"
    echo "mutants.sh: verify-units.sh fails on the unbroken nix/; fix that first" >&2
    exit 1
fi

passed=0
failed=0
n=0
while IFS='~' read -r file expr what; do
    n=$((n + 1))
    copy="$work/$n"
    copy "$copy"
    sed -i -e "$expr" "$copy/nix/$file"
    if cmp -s "$nixdir/$file" "$copy/nix/$file"; then
        failed=$((failed + 1))
        printf 'FAIL  mutant %d (%s): the edit did not apply to %s\n' "$n" "$what" "$file"
    elif [[ $what == systemd:* ]]; then
        if "$copy/nix/tests/verify-units.sh" >"$copy/out" 2>&1; then
            failed=$((failed + 1))
            printf 'FAIL  mutant %d (%s): verify-units.sh passed\n' "$n" "$what"
        else
            passed=$((passed + 1))
            printf 'ok    mutant %d (%s): %s\n' "$n" "$what" "$(grep -A1 -m1 '^FAIL' "$copy/out" | tail -n1 | sed 's/^ *//')"
        fi
    elif CHECK_FAIL_FAST=1 "$copy/nix/tests/check.sh" >"$copy/out" 2>&1 &&
        "$copy/nix/tests/verify-units.sh" >"$copy/out" 2>&1; then
        failed=$((failed + 1))
        printf 'FAIL  mutant %d (%s): check.sh and verify-units.sh passed\n' "$n" "$what"
    else
        passed=$((passed + 1))
        printf 'ok    mutant %d (%s): %s\n' "$n" "$what" "$(grep -m1 '^FAIL' "$copy/out" | cut -c7-)"
    fi
    rm -rf "$copy"
done <<<"$mutants"

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
