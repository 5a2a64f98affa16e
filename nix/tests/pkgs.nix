# A stand-in for nixpkgs as nix/module.nix and nix/package.nix use it. Packages are fake
# derivations (a name and a store path, nothing built); `callPackage` passes only what a
# function asks for, as nixpkgs' does, so asking for an argument nixpkgs would not have fails;
# `buildPythonApplication` checks its arguments the way a build would.
{ lib }:
let
  inherit (builtins)
    all
    attrNames
    concatStringsSep
    filter
    functionArgs
    intersectAttrs
    isBool
    isFunction
    isList
    isString
    ;

  fake = name: {
    type = "derivation";
    inherit name;
    outPath = "/nix/store/${builtins.substring 0 32 (builtins.hashString "sha256" name)}-${name}";
  };

  # Names nixpkgs' python3Packages has (each seen in nixpkgs' pkgs/development/python-modules/):
  # a dependency pyproject.toml gains must be added here, once nixpkgs is seen to have it.
  pythonPackageNames = [
    "agent-client-protocol"
    "anyio"
    "attrs"
    "cattrs"
    "httpx"
    "hypercorn"
    "mcp"
    "opentelemetry-api"
    "opentelemetry-exporter-otlp-proto-http"
    "opentelemetry-sdk"
    "setuptools"
    "starlette"
    "trio"
    "uvicorn"
  ];

  allowedArguments = [
    "pname"
    "version"
    "pyproject"
    "src"
    "build-system"
    "dependencies"
    "optional-dependencies"
    "nativeCheckInputs"
    "pythonImportsCheck"
    "pythonRelaxDeps"
    "doCheck"
    "meta"
    "passthru"
  ];

  buildPythonApplication =
    args:
    let
      problems =
        map (k: "unknown argument `${k}'") (filter (k: !(builtins.elem k allowedArguments)) (attrNames args))
        ++ lib.optional (!(args ? pname && isString args.pname && args.pname != "")) "pname must be a non-empty string"
        ++ lib.optional (!(args ? version && isString args.version && args.version != "")) "version must be a non-empty string"
        ++ lib.optional (!(args ? pyproject && isBool args.pyproject)) "pyproject must be set (true for a pyproject.toml build)"
        ++ lib.optional (!(args ? src)) "src is missing"
        ++ lib.optional (args ? src && !(args.src ? outPath || builtins.isPath args.src)) "src is not a source (a path or lib.fileset.toSource)"
        ++ lib.optional (!(isList (args.build-system or [ ]) && all lib.isDerivation (args.build-system or [ ]))) "build-system must be a list of packages"
        ++ lib.optional (!(isList (args.dependencies or [ ]) && all lib.isDerivation (args.dependencies or [ ]))) "dependencies must be a list of packages"
        ++ lib.optional (args ? meta && !(builtins.isAttrs args.meta)) "meta must be an attribute set";
    in
    if problems != [ ] then
      throw "buildPythonApplication: ${concatStringsSep "; " problems}"
    else
      fake "${args.pname}-${args.version}"
      // {
        inherit (args) pname version src;
        dependencies = map (d: d.name) (args.dependencies or [ ]);
        meta = args.meta or { };
      }
      // (args.passthru or { });

  python3Packages =
    builtins.listToAttrs (
      map (name: {
        inherit name;
        value = fake "python3.11-${name}";
      }) pythonPackageNames
    )
    // {
      inherit buildPythonApplication;
    };

  pkgs = {
    inherit lib python3Packages;
    bash = fake "bash-5.2";
    claude-code = fake "claude-code-2.1";
    coreutils = fake "coreutils-9.5";
    git = fake "git-2.47";
    github-mcp-server = fake "github-mcp-server-0.20";
    nodejs_22 = fake "nodejs-22.20";
    ripgrep = fake "ripgrep-14.1";
    util-linux = fake "util-linux-2.41";
    callPackage =
      f: overrides:
      let
        fn = if isFunction f then f else import f;
      in
      fn (intersectAttrs (functionArgs fn) pkgs // overrides);
  };
in
pkgs
