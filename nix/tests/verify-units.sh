#!/usr/bin/env bash
# Checks the units nix/module.nix generates with systemd itself: each configuration below is
# evaluated (as check.sh evaluates it), its units written as NixOS writes them
# (render_units.py), their store paths stubbed with executables, and `systemd-analyze verify`
# run on them; any word it says (a warning included: an unknown key, a bad KillMode or Type)
# is a failure. Ends with `N passed, N failed`.
#
#   nix/tests/verify-units.sh       needs nix-instantiate, python3 and systemd-analyze
set -uo pipefail

tests=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nixdir=$(dirname "$tests")

# shellcheck source=common.sh
. "$tests/common.sh"
need verify-units.sh "nix-bin python3 systemd" nix-instantiate python3 systemd-analyze

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

lib_expr="import $(nixpath "$tests/minilib.nix")"

# verify NAME CASE: the units of configuration CASE (a Nix expression) pass systemd-analyze verify.
verify() {
    local name=$1 case=$2 out
    if ! nix-instantiate --readonly-mode --eval --strict --json "$tests/eval.nix" \
        --arg case "$case" --arg lib "$lib_expr" >"$work/$name.json" 2>"$work/$name.err"; then
        failed=$((failed + 1))
        printf 'FAIL  %s: does not evaluate\n' "$name"
        head -n 25 "$work/$name.err" | sed 's/^/      /'
        return
    fi
    mkdir -p "$work/$name/units"
    python3 "$tests/render_units.py" "$work/$name.json" "$work/$name/units" "$work/$name/root" || {
        failed=$((failed + 1))
        printf 'FAIL  %s: the units could not be written\n' "$name"
        return
    }
    local units=("$work/$name/units"/*.service)
    if [ ! -e "${units[0]}" ]; then
        passed=$((passed + 1))
        printf 'ok    %s: no units\n' "$name"
        return
    fi
    # Alone, with the units' own directory first on the search path (they require each other).
    out=$(SYSTEMD_UNIT_PATH="$work/$name/units:" systemd-analyze verify --man=no "${units[@]}" 2>&1)
    if [ -z "$out" ]; then
        passed=$((passed + 1))
        printf 'ok    %s: %d units, systemd-analyze verify says nothing\n' "$name" "${#units[@]}"
    else
        failed=$((failed + 1))
        printf 'FAIL  %s: systemd-analyze verify says:\n' "$name"
        printf '%s\n' "$out" | sed "s|$work/$name/||g" | head -n 25 | sed 's/^/      /'
    fi
}

verify example "args: removeAttrs (import $(nixpath "$nixdir/examples/two-agents.nix") args) [ \"imports\" ]"
verify plain "$case_plain"
verify web '{ services.hyperhive.agents.w = { }; services.hyperhive.web = { enable = true; tokenFile = "/run/secrets/web-token"; }; }'
verify rundir "$case_rundir"
verify permission "$case_permission"
verify escapes "$case_escapes"
verify mcp "$case_mcp"
verify telemetry '{ services.hyperhive.agents.t = { telemetryEnvironmentFile = "/etc/hive/otel.env"; permission = "allow"; compactAt = 0.5; }; }'

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
