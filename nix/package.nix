# hive as a Python application: `pkgs.callPackage ./package.nix { }`.
#
# Its name, version, description and dependencies are read from pyproject.toml, so this file
# does not drift from it: each `project.dependencies` entry (and the otel extra) is nixpkgs'
# Python package of that normalised name (`Foo_Bar>=1` is `python3Packages.foo-bar`), unless
# the version nixpkgs has does not meet the requirement: then it is built from the PyPI sdist
# pinned in nix/pypi.nix, through an override of the Python package set, together with what
# that version needs in turn (nix/requirements.nix chooses). nixpkgs' check of every runtime
# dependency's version stays on.
{
  lib,
  python3,
  fetchPypi,
}:
let
  requirements = import ./requirements.nix;
  pins = import ./pypi.nix;

  project = (lib.importTOML ../pyproject.toml).project;
  asked = project.dependencies ++ project.optional-dependencies.otel;

  built = requirements.choose {
    requirements = asked;
    inherit pins;
    available = name: python3.pkgs.${name}.version or null;
  };

  # Its packages, and its optional-dependencies for `name[extra]`.
  packagesFor =
    ps: requirement:
    let
      wanted = requirements.parse requirement;
      package =
        ps.${wanted.name}
          or (throw "nix/package.nix: nixpkgs' python3Packages has no \"${wanted.name}\" (from the requirement \"${requirement}\").");
    in
    [ package ] ++ lib.concatMap (extra: package.optional-dependencies.${extra} or [ ]) wanted.extras;

  buildPin =
    ps: name:
    let
      pin = pins.${name};
    in
    ps.buildPythonPackage {
      pname = name;
      inherit (pin) version;
      pyproject = true;
      src = fetchPypi {
        pname = pin.sdist;
        inherit (pin) version hash;
      };
      build-system = map (tool: ps.${tool}) pin.build-system;
      dependencies = lib.unique (lib.concatMap (packagesFor ps) pin.requires);
      # uv-dynamic-versioning reads the version from git, which an sdist has not.
      env = lib.optionalAttrs (builtins.elem "uv-dynamic-versioning" pin.build-system) {
        UV_DYNAMIC_VERSIONING_BYPASS = pin.version;
      };
      # Their build systems may ask for newer releases of themselves than nixpkgs has; the
      # package's own runtime requirements are still checked.
      pypaBuildFlags = [ "--skip-dependency-check" ];
      pythonImportsCheck = [ pin.imports ];
      meta.description = "${name} ${pin.version}, from PyPI for hive (nix/pypi.nix)";
    };

  python = python3.override {
    self = python;
    packageOverrides = final: _prev: lib.genAttrs built (buildPin final);
  };

  # setup.py and hive/*.c: the optional C extension hive._clone3, built by stdenv's compiler
  # (hive falls back without it, and says so).
  source = lib.fileset.unions [
    ../pyproject.toml
    ../setup.py
    ../README.md
    (lib.fileset.fileFilter (file: file.hasExt "py" || file.hasExt "c" || file.name == "py.typed") ../hive)
  ];
in
python.pkgs.buildPythonApplication {
  pname = project.name;
  inherit (project) version;
  pyproject = true;

  # What the package is built from, and nothing else: nix/tests/check.sh lists it with
  # lib.fileset.toList and compares it with the files git tracks there.
  src = lib.fileset.toSource {
    root = ../.;
    fileset = source;
  };

  build-system = [ python.pkgs.setuptools ];
  # The otel extra too: a service exports its telemetry where its OTEL_* environment asks.
  dependencies = lib.unique (lib.concatMap (packagesFor python.pkgs) asked);

  passthru = {
    inherit source python;
    # The packages built from PyPI rather than taken from nixpkgs, by name.
    fromPypi = built;
  };

  pythonImportsCheck = [
    "hive"
    "hive.bash.relay"
  ];

  meta = {
    inherit (project) description;
    license = lib.licenses.mit;
    mainProgram = "hive";
  };
}
