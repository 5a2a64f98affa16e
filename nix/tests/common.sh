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

# Configurations both scripts evaluate (check.sh checks what they generate, verify-units.sh has
# systemd verify their units). Values with what systemd would read as a specifier (%), a
# variable ($), quotes and newlines are in case_escapes.
case_plain='{ services.hyperhive.agents.p = { user = "ops"; stateDir = "/srv/agents/p/"; workingDirectory = "/srv/work"; }; }'
case_rundir='{ services.hyperhive = { runtimeDir = "/run/hive"; agents.q = { }; }; }'
case_permission='{ services.hyperhive.agents = { a.permission = "allow"; b.permission = "accept_edits"; }; }'
case_escapes='{
  services.hyperhive.agents.e = {
    runtime = "acp";
    acp.command = "/opt/agents/run%n";
    acp.args = [ "--home=%h" "$HOME" "${"$"}{USER}" "say \"hi\"" "two\nlines" "back\\slash" ];
    acp.env = { PERCENT = "100%"; DOLLAR = "$PATH"; };
    model = "m%i$x";
    systemPrompt = "Be \"kind\" to 100% of\n$USERS.";
  };
}'
case_mcp='{ services.hyperhive.agents.m = {
  subagents = true;
  extraMcpServers.files = { command = "/bin/files-mcp"; };
  extraMcpServers.web = { command = "/bin/web"; args = [ "--port" "0" ]; env.TOKEN_FILE = "/run/t"; allowedTools = [ "*" ]; };
}; }'
