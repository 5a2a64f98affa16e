# Typed stand-ins for the NixOS options nix/module.nix sets, declared as NixOS declares them
# (names, types, defaults), so that a definition NixOS would reject is rejected here too.
# Only these options exist in the checks: a module setting anything else fails to evaluate.
{ lib, ... }:
let
  inherit (lib) mkOption types;

  unitScalar = types.oneOf [
    types.bool
    types.int
    types.str
    types.path
    types.package
  ];
  # NixOS: systemdUtils.unitOptions.unitOption
  unitOption = types.either unitScalar (types.listOf unitScalar);

  # NixOS checks Type= and Restart= (checkService); the other settings the module sets are
  # checked here too, against the values systemd takes.
  serviceChecks = {
    Type = [ "exec" "simple" "forking" "oneshot" "dbus" "notify" "notify-reload" "idle" ];
    Restart = [ "no" "on-success" "on-failure" "on-abnormal" "on-abort" "on-watchdog" "always" ];
    KillMode = [ "control-group" "mixed" "process" "none" ];
    KillSignal = [ "SIGINT" "SIGTERM" "SIGHUP" "SIGQUIT" "SIGKILL" "SIGUSR1" "SIGUSR2" ];
  };
  checkService =
    settings:
    builtins.all (
      name: !(settings ? ${name}) || builtins.elem settings.${name} serviceChecks.${name}
    ) (builtins.attrNames serviceChecks);

  unitNames = mkOption {
    type = types.listOf types.str;
    default = [ ];
  };

  serviceOptions = {
    options = {
      enable = mkOption {
        type = types.bool;
        default = true;
      };
      description = mkOption {
        type = types.str;
        default = "";
      };
      wantedBy = unitNames;
      requiredBy = unitNames;
      requires = unitNames;
      wants = unitNames;
      after = unitNames;
      before = unitNames;
      bindsTo = unitNames;
      partOf = unitNames;
      conflicts = unitNames;
      environment = mkOption {
        type = types.attrsOf (
          types.nullOr (
            types.oneOf [
              types.str
              types.path
              types.package
            ]
          )
        );
        default = { };
      };
      path = mkOption {
        type = types.listOf (types.either types.package types.str);
        default = [ ];
      };
      restartTriggers = mkOption {
        type = types.listOf types.unspecified;
        default = [ ];
      };
      serviceConfig = mkOption {
        type = types.addCheck (types.attrsOf unitOption) checkService;
        default = { };
      };
      unitConfig = mkOption {
        type = types.attrsOf unitOption;
        default = { };
      };
    };
  };

  userOptions = {
    options = {
      isSystemUser = mkOption {
        type = types.bool;
        default = false;
      };
      isNormalUser = mkOption {
        type = types.bool;
        default = false;
      };
      group = mkOption {
        type = types.str;
        default = "";
      };
      extraGroups = mkOption {
        type = types.listOf types.str;
        default = [ ];
      };
      home = mkOption {
        type = types.path;
        default = "/var/empty";
      };
      createHome = mkOption {
        type = types.bool;
        default = false;
      };
      description = mkOption {
        type = types.str;
        default = "";
      };
    };
  };

  groupOptions = {
    options = {
      gid = mkOption {
        type = types.nullOr types.int;
        default = null;
      };
      members = mkOption {
        type = types.listOf types.str;
        default = [ ];
      };
    };
  };

  etcOptions = {
    options = {
      text = mkOption {
        type = types.nullOr types.lines;
        default = null;
      };
      source = mkOption {
        type = types.nullOr types.path;
        default = null;
      };
      mode = mkOption {
        type = types.str;
        default = "symlink";
      };
      user = mkOption {
        type = types.str;
        default = "+0";
      };
      group = mkOption {
        type = types.str;
        default = "+0";
      };
    };
  };
in
{
  options = {
    assertions = mkOption {
      type = types.listOf (
        types.submodule {
          options = {
            assertion = mkOption { type = types.bool; };
            message = mkOption { type = types.str; };
          };
        }
      );
      default = [ ];
    };
    warnings = mkOption {
      type = types.listOf types.str;
      default = [ ];
    };
    systemd.services = mkOption {
      type = types.attrsOf (types.submodule serviceOptions);
      default = { };
    };
    systemd.tmpfiles.rules = mkOption {
      type = types.listOf types.str;
      default = [ ];
    };
    users.users = mkOption {
      type = types.attrsOf (types.submodule userOptions);
      default = { };
    };
    users.groups = mkOption {
      type = types.attrsOf (types.submodule groupOptions);
      default = { };
    };
    environment.etc = mkOption {
      type = types.attrsOf (types.submodule etcOptions);
      default = { };
    };
  };
}
