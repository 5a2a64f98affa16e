# What check.sh and verify-units.sh share; sourced, not run.

# need SCRIPT PACKAGES TOOL...: each TOOL on the PATH, else SCRIPT says which Debian packages
# bring them, and exits 2.
need() {
    local script=$1 packages=$2 tool
    shift 2
    for tool in "$@"; do
        if ! command -v "$tool" >/dev/null; then
            echo "$script: $tool is needed (Debian: apt-get install $packages)" >&2
            exit 2
        fi
    done
}

# Evaluation only: no builds, so no build users (Debian's nix-bin has no nixbld group).
export NIX_CONFIG="build-users-group =
${NIX_CONFIG:-}"

# A file name as a Nix path expression (any characters but a double quote).
nixpath() { printf '(/. + "%s")' "$1"; }
