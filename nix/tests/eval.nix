# Evaluates nix/module.nix as NixOS would, with one configuration module (`case`), and returns
# what the module generated (units, /etc files, tmpfiles rules, users, the package) for
# `nix-instantiate --eval --strict --json`. Failed assertions are an evaluation error listing
# their messages, as NixOS reports them.
#
#   nix-instantiate --readonly-mode --eval --strict --json nix/tests/eval.nix --arg case ./cases/x.nix
#
# `lib` defaults to the project's minilib; pass `--arg lib 'import <nixpkgs/lib>'` to check
# against the real one.
{
  case,
  lib ? import ./minilib.nix,
  # nixpkgs' Python packages by name and version (null: as nixpkgs had them in 2026-06).
  pythonVersions ? null,
}:
let
  pkgs = import ./pkgs.nix { inherit lib pythonVersions; };
  evaluated = lib.evalModules {
    modules = [
      ./nixos.nix
      ../module.nix
      case
    ];
    specialArgs = { inherit pkgs; };
  };
  config = evaluated.config;
  failed = map (a: a.message) (builtins.filter (a: !a.assertion) config.assertions);
  package = config.services.hyperhive.package;
in
if failed != [ ] then
  throw "\nFailed assertions:\n${lib.concatMapStrings (message: "- ${message}\n") failed}"
else
  {
    services = config.systemd.services;
    etc = builtins.mapAttrs (_: file: file.text) config.environment.etc;
    tmpfiles = config.systemd.tmpfiles.rules;
    users = config.users.users;
    groups = builtins.attrNames config.users.groups;
    warnings = config.warnings;
    package = {
      inherit (package) name pname version;
      path = package.outPath;
      dependencies = package.dependencies or [ ];
      fromPypi = package.fromPypi or [ ];
      # What the package set built from PyPI: each package, its source and what it needs.
      pypi = map (
        name:
        let
          built = package.python.pkgs.${name};
        in
        {
          inherit (built) pname version dependencies build-system env pypaBuildFlags pythonImportsCheck;
          inherit (built.src) url hash;
        }
      ) (package.fromPypi or [ ]);
      # What it is built from, relative to the repository, as lib.fileset lists it.
      src = map (path: lib.removePrefix "${toString ../..}/" (toString path)) (
        lib.fileset.toList package.source
      );
    };
  }
