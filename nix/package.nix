# hive as a Python application: `pkgs.callPackage ./package.nix { }`.
#
# Its name, version, description and dependencies are read from pyproject.toml, so this file
# does not drift from it: each `project.dependencies` entry is taken from nixpkgs' Python
# packages under its normalised name (`Foo_Bar>=1` is `python3Packages.foo-bar`).
{ lib, python3Packages }:
let
  inherit (lib)
    head
    importTOML
    match
    replaceStrings
    toLower
    ;

  project = (importTOML ../pyproject.toml).project;

  # What the package is built from, and nothing else (a test checks it: nix/tests/check.sh).
  sourcePaths = [
    ../pyproject.toml
    ../README.md
    ../hive
  ];

  # "mcp>=2.3,<3" -> "mcp"; "Foo_Bar.baz[extra]>=1" -> "foo-bar-baz"
  requirementName =
    requirement:
    let
      found = match "[[:space:]]*([A-Za-z0-9][A-Za-z0-9._-]*).*" requirement;
    in
    if found == null then
      throw "nix/package.nix: cannot read a package name in the pyproject.toml dependency \"${requirement}\"."
    else
      replaceStrings [ "_" "." ] [ "-" "-" ] (toLower (head found));

  fromNixpkgs =
    requirement:
    let
      name = requirementName requirement;
    in
    python3Packages.${name}
      or (throw "nix/package.nix: nixpkgs' python3Packages has no \"${name}\" (from the pyproject.toml dependency \"${requirement}\").");
in
python3Packages.buildPythonApplication {
  pname = project.name;
  inherit (project) version;
  pyproject = true;

  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions sourcePaths;
  };

  build-system = [ python3Packages.setuptools ];
  # The otel extra too: a service exports its telemetry where its OTEL_* environment asks.
  dependencies = map fromNixpkgs (project.dependencies ++ project.optional-dependencies.otel);

  passthru = { inherit sourcePaths; };

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
