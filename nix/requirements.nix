# Python requirements ("mcp>=2.3,<3", "pyjwt[crypto]>=2.10.1") read and checked in Nix, for
# nix/package.nix: which packages to take from nixpkgs, which to build from nix/pypi.nix, and
# a failure at evaluation, naming the requirement, where neither has a version that meets it.
# Markers are not read (the requirements given here have none); versions are compared as
# PEP 440 release numbers, trailing zeros ignored ("3" == "3.0").
let
  inherit (builtins)
    all
    any
    attrNames
    compareVersions
    concatMap
    concatStringsSep
    elemAt
    filter
    isString
    match
    replaceStrings
    split
    stringLength
    substring
    ;

  trim =
    s:
    let
      found = match "[[:space:]]*(.*[^[:space:]])[[:space:]]*" s;
    in
    if found == null then "" else elemAt found 0;

  splitOn = separator: s: filter (part: part != "") (map trim (filter isString (split separator s)));

  lowerChars = "abcdefghijklmnopqrstuvwxyz";
  upperChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  chars = s: map (i: substring i 1 s) (builtins.genList (i: i) (stringLength s));
  toLower = replaceStrings (chars upperChars) (chars lowerChars);

  # PEP 503: "Foo_Bar.baz" is "foo-bar-baz", nixpkgs' attribute name for it.
  normalise = name: replaceStrings [ "_" "." ] [ "-" "-" ] (toLower name);

  # "3.0.0" -> "3", "2.10.0" -> "2.10": release numbers compare as PEP 440 pads them.
  dropTrailingZeros =
    version:
    let
      found = match "(.*[^.])\\.0" version;
    in
    if found == null then version else dropTrailingZeros (elemAt found 0);
  compare = a: b: compareVersions (dropTrailingZeros a) (dropTrailingZeros b);

  # "2.10.*" -> "2.10"; "2.10" -> "2" (what ~= keeps fixed)
  dropLastPart =
    version:
    let
      found = match "(.*)\\.[^.]*" version;
    in
    if found == null then version else elemAt found 0;
in
rec {
  inherit normalise;

  # "pyjwt[crypto] >=2.10.1, <3" -> { name = "pyjwt"; extras = [ "crypto" ]; specifiers = [ ">=2.10.1" "<3" ]; text = ...; }
  parse =
    requirement:
    let
      found = match "[[:space:]]*([A-Za-z0-9][A-Za-z0-9._-]*)[[:space:]]*(\\[([^]]*)])?([^;]*)(;.*)?" requirement;
    in
    if found == null then
      throw "cannot read the Python requirement \"${requirement}\"."
    else
      {
        name = normalise (elemAt found 0);
        extras = if elemAt found 2 == null then [ ] else splitOn "," (elemAt found 2);
        specifiers = splitOn "," (elemAt found 3);
        text = trim requirement;
      };

  # Whether VERSION meets one specifier (">=2.3", "==2.*", "~=1.4.2", "!=1.5").
  meets =
    version: specifier:
    let
      found = match "(~=|===|==|!=|<=|>=|<|>)[[:space:]]*([^[:space:]]+)" specifier;
      operator = elemAt found 0;
      wanted = elemAt found 1;
      wildcard = match "(.*)\\.\\*" wanted;
      order = compare version wanted;
    in
    if found == null then
      throw "cannot read the version specifier \"${specifier}\"."
    else if operator == "==" && wildcard != null then
      let
        prefix = elemAt wildcard 0;
      in
      version == prefix || substring 0 (stringLength prefix + 1) version == "${prefix}."
    else if operator == "==" then
      order == 0
    else if operator == "!=" then
      !(meets version "==${wanted}")
    else if operator == ">=" then
      order >= 0
    else if operator == "<=" then
      order <= 0
    else if operator == ">" then
      order > 0
    else if operator == "<" then
      order < 0
    else if operator == "~=" then
      order >= 0 && meets version "==${dropLastPart wanted}.*"
    else
      version == wanted;

  # Whether VERSION (a string, or null for none) meets a parsed requirement.
  satisfiedBy = version: requirement: version != null && all (meets version) requirement.specifiers;

  # Which of PINS (nix/pypi.nix) to build: a pin is built when a requirement on its name, made
  # by REQUIREMENTS or by a pin being built, is not met by the version nixpkgs has
  # (`available name`: a version string, or null). Then every such requirement must be met by
  # what is taken, or evaluation stops and says which is not.
  choose =
    {
      requirements,
      pins,
      available,
    }:
    let
      asked = used: map parse (requirements ++ concatMap (name: pins.${name}.requires) used);
      unmet = reqs: name: any (r: r.name == name && !(satisfiedBy (available name) r)) reqs;
      step =
        used:
        let
          next = filter (unmet (asked used)) (attrNames pins);
        in
        if next == used then used else step next;
      used = step [ ];
      versionOf = name: if builtins.elem name used then pins.${name}.version else available name;
      failures = filter (r: !(satisfiedBy (versionOf r.name) r)) (asked used);
      describe =
        r:
        let
          version = versionOf r.name;
        in
        "\"${r.text}\" (${if version == null then "nixpkgs has no ${r.name}" else "${r.name} ${version} is what there is"})";
    in
    if failures == [ ] then
      used
    else
      throw "nix/package.nix: no version at hand meets ${concatStringsSep ", " (map describe failures)}: add or update its entry in nix/pypi.nix (nix/tests/pypi-pins.py checks it against PyPI).";
}
