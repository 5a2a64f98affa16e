# A stand-in for nixpkgs as nix/module.nix and nix/package.nix use it. Packages are fake
# derivations (a name and a store path, nothing built); `callPackage` passes only what a
# function asks for, as nixpkgs' does, so asking for an argument nixpkgs would not have fails;
# `buildPythonApplication` checks its arguments the way a build would.
{
  lib,
  # nixpkgs' Python packages by name and version; null for nixpkgs2606 below.
  pythonVersions ? null,
}:
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

  # nixpkgs' python3Packages as of 2026-06 (lib 26.11), name and version as seen in its
  # pkgs/development/python-modules/, for what nix/package.nix and nix/pypi.nix ask of it: a
  # dependency pyproject.toml gains must be added here once nixpkgs is seen to have it.
  # The argument `pythonVersions` replaces it, for a nixpkgs newer or older than that.
  nixpkgs2606 = {
    agent-client-protocol = "0.8.1";
    anyio = "4.12.0";
    attrs = "26.1.0";
    cattrs = "26.1.0";
    cryptography = "46.0.3";
    google-re2 = "1.1";
    h11 = "0.16.0";
    hatch-fancy-pypi-readme = "25.1.0";
    hatchling = "1.31.0";
    httpcore2 = "2.5.0";
    httpx = "0.28.1";
    httpx2 = "2.9.1";
    hypercorn = "0.18.0";
    idna = "3.18";
    jsonschema = "4.26.0";
    mcp = "1.27.1";
    mcp-types = "2.2.0";
    opentelemetry-api = "1.40.0";
    opentelemetry-exporter-otlp-proto-http = "1.40.0";
    opentelemetry-sdk = "1.40.0";
    pdm-backend = "2.4.9";
    pydantic = "2.13.4";
    pyjwt = "2.15.1";
    python-multipart = "0.0.32";
    setuptools = "82.0.1";
    sse-starlette = "3.2.0";
    starlette = "1.7.0";
    trio = "0.32.0";
    truststore = "0.10.4";
    typing-extensions = "4.16.0";
    typing-inspection = "0.4.2";
    uv-dynamic-versioning = "0.13.0";
    uvicorn = "0.51.0";
  };
  versions = if pythonVersions == null then nixpkgs2606 else pythonVersions;
  optionalDependencies = {
    pyjwt.crypto = [ "cryptography" ];
  };

  pythonPackage =
    pname: version:
    fake "python3.13-${pname}-${version}"
    // {
      inherit pname version;
      from = "nixpkgs";
      optional-dependencies = builtins.mapAttrs (_: map (name: pythonPackage name versions.${name})) (
        optionalDependencies.${pname} or { }
      );
    };

  # buildPythonPackage and buildPythonApplication: the arguments checked the way a build would.
  checkPythonBuild =
    allowedArguments: what: args:
    let
      problems =
        map (k: "unknown argument `${k}'") (filter (k: !(builtins.elem k allowedArguments)) (attrNames args))
        ++ lib.optional (!(args ? pname && isString args.pname && args.pname != "")) "pname must be a non-empty string"
        ++ lib.optional (!(args ? version && isString args.version && args.version != "")) "version must be a non-empty string"
        ++ lib.optional (!(args ? pyproject && isBool args.pyproject)) "pyproject must be set (true for a pyproject.toml build)"
        ++ lib.optional (!(args ? src)) "src is missing"
        ++ lib.optional (args ? src && !(args.src ? outPath || builtins.isPath args.src)) "src is not a source (a path, a fetcher's or lib.fileset.toSource's)"
        ++ lib.optional (!(isList (args.build-system or [ ]) && all lib.isDerivation (args.build-system or [ ]))) "build-system must be a list of packages"
        ++ lib.optional (!(isList (args.dependencies or [ ]) && all lib.isDerivation (args.dependencies or [ ]))) "dependencies must be a list of packages"
        ++ lib.optional (args ? meta && !(builtins.isAttrs args.meta)) "meta must be an attribute set";
    in
    if problems != [ ] then
      throw "${what}: ${concatStringsSep "; " problems}"
    else
      fake "${args.pname}-${args.version}"
      // {
        inherit (args) pname version src;
        dependencies = map (d: { inherit (d) pname version from; }) (args.dependencies or [ ]);
        build-system = map (d: d.pname) (args.build-system or [ ]);
        meta = args.meta or { };
      }
      // (args.passthru or { });

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

  buildPythonApplication = checkPythonBuild allowedArguments "buildPythonApplication";
  buildPythonPackage =
    args:
    checkPythonBuild (allowedArguments ++ [
      "env"
      "pypaBuildFlags"
    ]) "buildPythonPackage" args
    // {
      from = "pypi";
      env = args.env or { };
      pypaBuildFlags = args.pypaBuildFlags or [ ];
      pythonImportsCheck = args.pythonImportsCheck or [ ];
      optional-dependencies = { };
    };

  # fetchPypi: the sdist's address as nixpkgs builds it (mirror://pypi is PyPI's
  # packages/source/), and a hash that must be an SRI SHA-256.
  fetchPypi =
    {
      pname,
      version,
      hash,
    }:
    if builtins.match "sha256-[A-Za-z0-9+/]{43}=" hash == null then
      throw "fetchPypi: ${pname} ${version}: the hash is not an SRI SHA-256 (sha256-...=)."
    else
      fake "${pname}-${version}.tar.gz"
      // {
        url = "https://files.pythonhosted.org/packages/source/${builtins.substring 0 1 pname}/${pname}/${pname}-${version}.tar.gz";
        inherit hash;
      };

  # python3: its package set, and `override { self; packageOverrides; }` as nixpkgs has it.
  makePython =
    packageOverrides:
    let
      base = builtins.mapAttrs pythonPackage versions // {
        inherit buildPythonApplication buildPythonPackage fetchPypi;
      };
      final = base // packageOverrides final base;
      python = fake "python3-3.13" // {
        pkgs = final;
        override = args: makePython (args.packageOverrides or (_: _: { }));
      };
    in
    python;
  python3 = makePython (_: _: { });

  pkgs = {
    inherit lib python3 fetchPypi;
    python3Packages = python3.pkgs;
    # (for the checks: the versions python3.pkgs has)
    pythonVersions = versions;
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
