# Two agents on one host: "scribe" runs on the Claude Code CLI, "reviewer" on an ACP agent
# (claude-agent-acp). Each gets its own user, state dir, bash daemon and harness.
{ pkgs, ... }:
{
  imports = [ ./hive/nix/module.nix ]; # a checkout of hive beside configuration.nix

  services.hyperhive.agents = {
    scribe = {
      runtime = "claude";
      claude.command = "${pkgs.claude-code}/bin/claude"; # unfree: allow it in nixpkgs.config
      model = "sonnet";
      effort = "high";
      idleTimeout = 600; # seconds of silence before a turn is stopped
      compactAt = 0.8; # checkpoint and compact past 80% of the context window
      systemPrompt = "You keep the project's documentation up to date.";
      subagents = true;
      path = [
        pkgs.git
        pkgs.ripgrep
      ];
      # ANTHROPIC_API_KEY=... and GITHUB_PERSONAL_ACCESS_TOKEN=..., kept out of the Nix store
      environmentFile = "/run/secrets/hive-scribe.env";
      extraMcpServers.github = {
        command = "${pkgs.github-mcp-server}/bin/github-mcp-server";
        args = [ "stdio" ];
        env.GITHUB_TOOLSETS = "repos,issues";
        allowedTools = [
          "get_issue"
          "list_issues"
        ];
      };
    };

    reviewer = {
      runtime = "acp";
      acp.command = "${pkgs.nodejs_22}/bin/npx";
      acp.args = [
        "--yes"
        "@agentclientprotocol/claude-agent-acp@0.101.0"
      ];
      acp.env.DISABLE_AUTOUPDATER = "1";
      model = "opus";
      idleTimeout = 900;
      path = [
        pkgs.git
        pkgs.nodejs_22
      ];
      environmentFile = "/run/secrets/hive-reviewer.env"; # ANTHROPIC_API_KEY=...
      # OTEL_TRACES_EXPORTER=otlp, OTEL_EXPORTER_OTLP_ENDPOINT=...: its turns and tasks, traced
      telemetryEnvironmentFile = "/etc/hive/otel.env";
    };
  };
}
