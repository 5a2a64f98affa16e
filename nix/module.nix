# hive on NixOS: `services.hyperhive.agents.<name>` runs one agent per entry, supervised by
# systemd, with no scheduler of hive's own.
#
# Each enabled agent gets two units, both running as the agent's user:
#
#   hive-bash-daemon-<name>.service  the agent's background bash tasks (hive-bash-daemon),
#                                    serving /run/hyperhive/<name>/bash.sock
#   hive-agent-<name>.service        the harness (hive-agent): the agent socket
#                                    /run/hyperhive/<name>/agent.sock, the wake queue and the
#                                    turns, through the runtime (claude or ACP) chosen here
#
# The agent's settings reach the programs as they read them: the runtime through
# HIVE_RUNTIME / HIVE_CLAUDE_COMMAND / HIVE_ACP_COMMAND / HIVE_ACP_ARGS (a JSON list) /
# HIVE_ACP_ENV (a JSON object), as hive's RuntimeSpec.from_env reads them; the paths through
# HIVE_STATE_DIR / HIVE_AGENT_SOCKET / HIVE_BASH_SOCKET; the permission policy through
# HIVE_PERMISSION; the rest as hive-agent's flags. Its MCP servers go to
# /etc/hyperhive/<name>/mcp.json, in the `{"mcpServers": {...}}` shape of hive-agent's
# --mcp-config, with the bash relay always among them, every tool of it allowed.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  inherit (lib)
    attrNames
    concatLists
    concatMapStringsSep
    concatStringsSep
    filterAttrs
    groupBy
    length
    literalExpression
    mapAttrs
    mapAttrs'
    mapAttrsToList
    match
    mkIf
    mkMerge
    mkOption
    nameValuePair
    optional
    optionalAttrs
    optionals
    removeSuffix
    replaceStrings
    stringLength
    toJSON
    types
    ;

  cfg = config.services.hyperhive;
  agents = filterAttrs (_: agent: agent.enable) cfg.agents;

  # systemd reads `%` in Environment= and ExecStart= as a specifier and `$` in ExecStart= as a
  # variable; NixOS writes Environment= values as they are, so both are escaped here.
  unitEnvValue = replaceStrings [ "%" ] [ "%%" ];
  execArg = arg: replaceStrings [ "%" "$" ] [ "%%" "$$" ] (toJSON arg);
  execLine = argv: concatMapStringsSep " " execArg argv;

  # An agent's name is part of its unit names and of paths: hive-agent-<name>.service,
  # /run/hyperhive/<name>/agent.sock (a Unix socket path may be 107 bytes long at most).
  validName = name: match "[A-Za-z0-9][A-Za-z0-9._-]{0,63}" name != null;
  validServerName = name: match "[A-Za-z0-9_-]{1,64}" name != null;
  # Names hive-agent gives MCP servers of its own: bash always, subagent with `subagents`.
  reservedServers = [
    "bash"
    "hyperhive"
    "subagent"
  ];

  daemonUnit = name: "hive-bash-daemon-${name}";
  agentUnit = name: "hive-agent-${name}";
  runtimeDir = name: "${cfg.runtimeDir}/${name}";
  bashSocket = name: "${runtimeDir name}/bash.sock";
  agentSocket = name: "${runtimeDir name}/agent.sock";
  mcpConfigPath = name: "/etc/hyperhive/${name}/mcp.json";
  defaultUser = name: "hive-${name}";
  normalDir = removeSuffix "/";

  mcpServerOptions = {
    options = {
      command = mkOption {
        type = types.str;
        example = literalExpression ''"''${pkgs.github-mcp-server}/bin/github-mcp-server"'';
        description = "The MCP server's executable; the agent starts it over stdio.";
      };
      args = mkOption {
        type = types.listOf types.str;
        default = [ ];
        description = "Its arguments.";
      };
      env = mkOption {
        type = types.attrsOf types.str;
        default = { };
        description = "Variables added to its environment.";
      };
      allowedTools = mkOption {
        type = types.listOf types.str;
        default = [ ];
        example = [ "*" ];
        description = ''
          The server's tools the agent may call without asking: tool names, or `"*"` for all.
          Nobody is there to answer a question, so a tool that is not allowed is refused.
        '';
      };
    };
  };

  agentOptions =
    { name, ... }:
    {
      options = {
        enable = mkOption {
          type = types.bool;
          default = true;
          description = "Whether to run this agent (false keeps its configuration and stops its units).";
        };
        runtime = mkOption {
          type = types.enum [
            "claude"
            "acp"
          ];
          default = "claude";
          description = ''
            What runs the agent's turns: `claude` (the Claude Code CLI, `claude.command`) or
            `acp` (any Agent Client Protocol agent, `acp.command`).
          '';
        };
        claude.command = mkOption {
          type = types.str;
          default = "claude";
          example = literalExpression ''"''${pkgs.claude-code}/bin/claude"'';
          description = "The claude executable (a name is looked up in the units' PATH, see `path`).";
        };
        acp = {
          command = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = literalExpression ''"''${pkgs.nodejs}/bin/npx"'';
            description = "The ACP agent's executable; required when `runtime` is `acp`.";
          };
          args = mkOption {
            type = types.listOf types.str;
            default = [ ];
            description = "Its arguments.";
          };
          env = mkOption {
            type = types.attrsOf types.str;
            default = { };
            description = "Variables added to its environment.";
          };
        };
        model = mkOption {
          type = types.nullOr types.str;
          default = null;
          example = "sonnet";
          description = "The model (claude: an alias such as `sonnet`, or a full id); null: the agent's default.";
        };
        effort = mkOption {
          type = types.nullOr types.str;
          default = null;
          example = "high";
          description = "The effort level (claude: low, medium, high, xhigh or max); null: the agent's default.";
        };
        idleTimeout = mkOption {
          type = types.nullOr types.numbers.positive;
          default = null;
          example = 600;
          description = "Stop a turn the agent has sent nothing for this many seconds; null: never.";
        };
        compactAt = mkOption {
          type = types.nullOr types.number;
          default = null;
          example = 0.8;
          description = ''
            The compaction watermark: after a turn whose context is more than this fraction
            full, the agent checkpoints and compacts. null: hive-agent's default.
          '';
        };
        systemPrompt = mkOption {
          type = types.nullOr types.str;
          default = null;
          description = "Appended to the agent's system prompt.";
        };
        permission = mkOption {
          type = types.enum [
            "default"
            "accept_edits"
            "allow"
          ];
          default = "default";
          description = ''
            What a tool call the agent would ask a person about may do, since nobody is there
            to ask (hive-agent's `--permission`, given as HIVE_PERMISSION): `default` refuses
            it, `accept_edits` allows file edits (claude's acceptEdits; on ACP, requests for
            reads, edits, deletes, moves and searches), `allow` allows everything. hive's own
            tools, and those an `extraMcpServers` entry lists in `allowedTools`, are allowed
            under every policy.
          '';
        };
        subagents = mkOption {
          type = types.bool;
          default = false;
          description = "Give the agent subagents: the MCP server `subagent` (hive-subagent-mcp).";
        };
        extraMcpServers = mkOption {
          type = types.attrsOf (types.submodule mcpServerOptions);
          default = { };
          description = ''
            MCP servers the agent starts, by name (its tools are `mcp__<name>__<tool>`). The
            server `bash` (hive's background shell) is always added, every tool of it allowed.
          '';
        };
        user = mkOption {
          type = types.str;
          default = defaultUser name;
          defaultText = literalExpression ''"hive-<name>"'';
          description = ''
            The user both units run as. The default user is created (a system user in the
            group `hyperhive`); another must be defined elsewhere in the configuration.
          '';
        };
        stateDir = mkOption {
          type = types.str;
          default = "/var/lib/hyperhive/${name}";
          defaultText = literalExpression ''"/var/lib/hyperhive/<name>"'';
          description = ''
            The agent's state: the wake queue, the turn log, session ids, bash task output.
            Created 0700, owned by `user`; one agent's alone.
          '';
        };
        workingDirectory = mkOption {
          type = types.nullOr types.str;
          default = null;
          description = "Where the agent and its bash tasks run; null: `stateDir`.";
        };
        path = mkOption {
          type = types.listOf (types.either types.package types.str);
          default = [ ];
          example = literalExpression "[ pkgs.git pkgs.claude-code ]";
          description = "Packages whose bin/ is on both units' PATH (the agent's and its tasks' tools).";
        };
        environmentFile = mkOption {
          type = types.nullOr types.str;
          default = null;
          example = "/run/secrets/hive-alpha.env";
          description = ''
            A file of KEY=value lines read into the agent's environment (systemd's
            EnvironmentFile=), for secrets such as ANTHROPIC_API_KEY that must stay out of the
            Nix store.
          '';
        };
        telemetryEnvironmentFile = mkOption {
          type = types.nullOr types.str;
          default = null;
          example = "/etc/hive/otel.env";
          description = ''
            A file of OTEL_* lines (OTEL_TRACES_EXPORTER=otlp, OTEL_METRICS_EXPORTER=otlp,
            OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318, ...) read into the environment of
            both units (systemd's EnvironmentFile=): the agent's turns and tool calls and its bash
            tasks are then exported as OpenTelemetry traces and metrics. Unlike environmentFile,
            the bash daemon reads it too, so keep secrets out of it.
          '';
        };
      };
    };

  # -- what each agent's units are made of ----------------------------------------------------

  workdirOf = agent: if agent.workingDirectory != null then agent.workingDirectory else agent.stateDir;

  pathsEnv = name: agent: {
    HIVE_STATE_DIR = agent.stateDir;
    HIVE_AGENT_SOCKET = agentSocket name;
    HIVE_BASH_SOCKET = bashSocket name;
  };

  runtimeEnv =
    agent:
    {
      HIVE_RUNTIME = agent.runtime;
    }
    // optionalAttrs (agent.runtime == "claude") {
      HIVE_CLAUDE_COMMAND = agent.claude.command;
    }
    // optionalAttrs (agent.runtime == "acp") {
      HIVE_ACP_COMMAND = if agent.acp.command == null then "" else agent.acp.command;
      HIVE_ACP_ARGS = toJSON agent.acp.args;
      HIVE_ACP_ENV = toJSON agent.acp.env;
    };

  mcpServers =
    name: agent:
    mapAttrs (_: server: {
      type = "stdio";
      inherit (server)
        command
        args
        env
        allowedTools
        ;
    }) agent.extraMcpServers
    // {
      bash = {
        type = "stdio";
        command = "${cfg.package}/bin/hive-bash-mcp";
        args = [
          "--socket"
          (bashSocket name)
        ];
        env = { };
        allowedTools = [ "*" ];
      };
    };

  mcpConfig = name: agent: toJSON { mcpServers = mcpServers name agent; };

  agentArgv =
    name: agent:
    [
      "${cfg.package}/bin/hive-agent"
      "--mcp-config"
      (mcpConfigPath name)
    ]
    ++ optionals (agent.model != null) [
      "--model"
      agent.model
    ]
    ++ optionals (agent.effort != null) [
      "--effort"
      agent.effort
    ]
    ++ optionals (agent.idleTimeout != null) [
      "--idle-timeout"
      (toJSON agent.idleTimeout)
    ]
    ++ optionals (agent.compactAt != null) [
      "--compact-at"
      (toJSON agent.compactAt)
    ]
    ++ optionals (agent.systemPrompt != null) [
      "--system-prompt"
      agent.systemPrompt
    ]
    ++ optional agent.subagents "--subagents";

  # util-linux for unshare: each task gets a cgroup namespace of its own through it (hive.bash.procs._namespaces).
  unitPath = agent: [
    cfg.package
    pkgs.bash
    pkgs.util-linux
  ] ++ agent.path;

  daemonService = name: agent: {
    description = "hive: background bash tasks of agent ${name}";
    wantedBy = [ "multi-user.target" ];
    path = unitPath agent;
    environment = mapAttrs (_: unitEnvValue) (
      pathsEnv name agent // { HIVE_BASH_WORKDIR = workdirOf agent; }
    );
    serviceConfig = {
      Type = "notify"; # hive-bash-daemon says READY=1 once its socket listens
      ExecStart = execLine [ "${cfg.package}/bin/hive-bash-daemon" ];
      User = agent.user;
      WorkingDirectory = workdirOf agent;
      UMask = "0077";
      # Other users' processes are invisible here (and this unit's to other such units): a
      # task or an agent cannot read another's command line or environment from /proc.
      ProtectProc = "invisible";
      Restart = "on-failure";
      # The daemon alone is stopped, with SIGINT: its tasks go on running, and the next start
      # re-adopts them (a restart loses no task). `systemctl kill --kill-whom=all
      # --signal=SIGINT` reaches the tasks too, for an agent that is going away.
      KillMode = "process";
      KillSignal = "SIGINT";
      # The daemon's cgroup subtree is its own: each task gets a cgroup v2 below it, which
      # holds every process the task starts (setsid, double forks, a cleared environment).
      Delegate = true;
    }
    // optionalAttrs (agent.telemetryEnvironmentFile != null) {
      EnvironmentFile = agent.telemetryEnvironmentFile;
    };
  };

  agentService = name: agent: {
    description = "hive: agent ${name} (${agent.runtime})";
    wantedBy = [ "multi-user.target" ];
    requires = [ "${daemonUnit name}.service" ];
    after = [ "${daemonUnit name}.service" ];
    path = unitPath agent;
    environment = mapAttrs (_: unitEnvValue) (
      pathsEnv name agent // runtimeEnv agent // { HIVE_PERMISSION = agent.permission; }
    );
    restartTriggers = [ (mcpConfig name agent) ];
    serviceConfig = {
      Type = "notify"; # hive-agent says READY=1 once its agent socket listens
      ExecStart = execLine (agentArgv name agent);
      User = agent.user;
      WorkingDirectory = workdirOf agent;
      UMask = "0077";
      # As for the daemon. hive itself puts no secret on a command line (claude's prompt goes
      # to its stdin, the MCP configuration to a 0600 file in the state dir).
      ProtectProc = "invisible";
      Restart = "on-failure";
      # SIGINT to hive-agent alone: it stops the running turn the SIGINT way itself (an ACP
      # agent is sent session/cancel first), which a signal to the whole group would cut short.
      KillMode = "mixed";
      KillSignal = "SIGINT";
    }
    // optionalAttrs (environmentFiles agent != [ ]) {
      EnvironmentFile =
        if length (environmentFiles agent) == 1 then builtins.head (environmentFiles agent) else environmentFiles agent;
    };
  };

  # The agent's own secrets first, then its telemetry settings (systemd reads them in order).
  environmentFiles =
    agent:
    builtins.filter (file: file != null) [
      agent.environmentFile
      agent.telemetryEnvironmentFile
    ];

  # -- configurations that cannot work -----------------------------------------------------------

  agentAssertions =
    name: agent:
    let
      at = ''services.hyperhive.agents."${name}"'';
      extra = attrNames agent.extraMcpServers;
    in
    [
      {
        assertion = validName name;
        message = ''${at}: "${name}" cannot be an agent name: it becomes part of the unit names ${agentUnit name}.service and ${daemonUnit name}.service and of the socket paths under ${cfg.runtimeDir}/; use 1 to 64 of the characters A-Z a-z 0-9 . _ -, starting with a letter or a digit.'';
      }
      {
        assertion = agent.runtime != "acp" || (agent.acp.command != null && agent.acp.command != "");
        message = ''${at}: runtime is "acp" but acp.command is not set; set it to the ACP agent's executable (with acp.args and acp.env as it needs), or use runtime = "claude".'';
      }
      (plainPath "${at}.stateDir" agent.stateDir)
    ]
    ++ optional (agent.workingDirectory != null) (plainPath "${at}.workingDirectory" agent.workingDirectory)
    ++ optional (agent.environmentFile != null) (plainPath "${at}.environmentFile" agent.environmentFile)
    ++ optional (agent.telemetryEnvironmentFile != null) (
      plainPath "${at}.telemetryEnvironmentFile" agent.telemetryEnvironmentFile
    )
    ++ [
      {
        assertion = agent.compactAt == null || (agent.compactAt > 0 && agent.compactAt <= 1);
        message = ''${at}.compactAt: ${toJSON agent.compactAt} is not a fraction of the context window; use a number in (0, 1], such as 0.8.'';
      }
      {
        assertion = agent.user != defaultUser name || stringLength agent.user <= 32;
        message = ''${at}: the user "${agent.user}" made for this agent is longer than 32 characters, which Linux does not allow; set ${at}.user to a shorter name (and define that user).'';
      }
    ]
    ++ map (server: {
      assertion = !(builtins.elem server reservedServers);
      message = ''${at}.extraMcpServers."${server}": the name "${server}" is hive's own (bash: the background shell, always given; hyperhive: hive-agent's tools; subagent: with subagents = true); give the server another name.'';
    }) extra
    ++ map (server: {
      assertion = validServerName server;
      message = ''${at}.extraMcpServers."${server}": an MCP server's name becomes part of its tools' names (mcp__<server>__<tool>); use 1 to 64 of A-Z a-z 0-9 _ -.'';
    }) extra;

  # Paths go into unit settings and tmpfiles rules, where a space separates fields and `%` is
  # a specifier: only plain absolute paths are taken.
  plainPath = option: path: {
    assertion = match "/[^[:space:]%\"'\\]*" path != null;
    message = ''${option}: "${path}" must be an absolute path without spaces, %, quotes or backslashes (it is written into systemd units and tmpfiles rules as it is).'';
  };

  # hive web reads every agent's state dir (0700, each its own user's) and talks to their
  # sockets: root, with the file system read-only to it.
  webService = {
    description = "hive: the fleet's live page (hive web)";
    wantedBy = [ "multi-user.target" ];
    environment = {
      HIVE_RUNTIME_ROOT = cfg.runtimeDir;
      HIVE_WEB_TOKEN_FILE = if cfg.web.tokenFile == null then "" else cfg.web.tokenFile;
    };
    serviceConfig = {
      ExecStart = execLine (
        [
          "${cfg.package}/bin/hive"
          "web"
          "--listen"
          cfg.web.listen
        ]
        ++ mapAttrsToList (_: agent: agent.stateDir) agents
      );
      Restart = "on-failure";
      KillSignal = "SIGINT";
      ProtectSystem = "strict";
      ProtectHome = true;
      PrivateTmp = true;
      NoNewPrivileges = true;
    };
  };

  createdUsers = filterAttrs (name: agent: agent.user == defaultUser name) agents;

  sharedStateDirs =
    let
      byDir = groupBy (name: normalDir agents.${name}.stateDir) (attrNames agents);
    in
    filterAttrs (_: names: length names > 1) byDir;
in
{
  options.services.hyperhive = {
    package = mkOption {
      type = types.package;
      default = pkgs.callPackage ./package.nix { };
      defaultText = literalExpression "pkgs.callPackage ./package.nix { }";
      description = "The hive package whose programs the units run.";
    };
    runtimeDir = mkOption {
      type = types.str;
      default = "/run/hyperhive";
      description = "Where each agent's directory of sockets is made (<runtimeDir>/<name>, 0700).";
    };
    agents = mkOption {
      type = types.attrsOf (types.submodule agentOptions);
      default = { };
      description = "The agents to run on this host, by name.";
    };
    web = {
      enable = mkOption {
        type = types.bool;
        default = false;
        description = "Run `hive web`, the fleet's live page in a browser, as hive-web.service.";
      };
      listen = mkOption {
        type = types.str;
        default = "127.0.0.1:8470";
        description = "Where it listens (HOST:PORT); put a TLS proxy before it to listen further than loopback.";
      };
      tokenFile = mkOption {
        type = types.nullOr types.str;
        default = null;
        example = "/run/secrets/hive-web-token";
        description = ''
          A file holding the token every request must carry (16 characters or more), kept out
          of the Nix store; open http://<listen>/?token=<token> once, a cookie does the rest.
        '';
      };
    };
  };

  config = mkMerge [
    {
      assertions =
        concatLists (mapAttrsToList agentAssertions cfg.agents)
        ++ mapAttrsToList (dir: names: {
          assertion = false;
          message = "services.hyperhive.agents: ${
            concatStringsSep " and " (map (n: ''"${n}"'') names)
          } share the state dir ${dir}; give each agent its own stateDir (its bash daemon locks the directory, and its queue and turn log are its alone).";
        }) sharedStateDirs
        ++ optional (cfg.agents != { }) (plainPath "services.hyperhive.runtimeDir" cfg.runtimeDir)
        ++ optionals cfg.web.enable [
          {
            assertion = cfg.web.tokenFile != null;
            message = "services.hyperhive.web.enable is set but web.tokenFile is not; name a file holding the token (16 characters or more), kept out of the Nix store.";
          }
          (plainPath "services.hyperhive.web.tokenFile" (if cfg.web.tokenFile == null then "/" else cfg.web.tokenFile))
        ];
    }
    (mkIf cfg.web.enable { systemd.services.hive-web = webService; })
    (mkIf (agents != { }) {
      systemd.services = mkMerge [
        (mapAttrs' (name: agent: nameValuePair (daemonUnit name) (daemonService name agent)) agents)
        (mapAttrs' (name: agent: nameValuePair (agentUnit name) (agentService name agent)) agents)
      ];

      environment.etc = mapAttrs' (
        name: agent: nameValuePair "hyperhive/${name}/mcp.json" { text = mcpConfig name agent; }
      ) agents;

      systemd.tmpfiles.rules = [
        "d ${cfg.runtimeDir} 0755 root root -"
      ]
      ++ concatLists (
        mapAttrsToList (name: agent: [
          "d ${runtimeDir name} 0700 ${agent.user} - -"
          "d ${agent.stateDir} 0700 ${agent.user} - -"
        ]) agents
      );

      users.groups = optionalAttrs (createdUsers != { }) { hyperhive = { }; };
      users.users = mapAttrs' (
        name: agent:
        nameValuePair agent.user {
          isSystemUser = true;
          group = "hyperhive";
          home = agent.stateDir;
          description = "hive agent ${name}";
        }
      ) createdUsers;
    })
  ];
}
