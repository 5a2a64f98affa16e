# The part of nixpkgs' `lib` that nix/module.nix, nix/package.nix and the test stand-ins use,
# written for the checks in this directory: nixpkgs cannot be fetched where they run.
#
# Every name here has the meaning and argument order of the nixpkgs function of the same name,
# and the module system below keeps the rules a module author relies on: options must be
# declared before they are defined, every definition is checked against its option's type,
# mkIf/mkMerge/mkOverride are pushed down and discharged as nixpkgs does (so a condition is not
# evaluated to find which options a block defines), and the definitions of an option are merged
# by its type. What is missing fails: an undeclared option, an ill-typed definition, a lib
# function that is not here (an attribute error), never a silent pass.
#
# `nix/tests/check.sh` runs against the real lib instead when HIVE_NIX_LIB names one.
let
  inherit (builtins)
    all
    any
    attrNames
    concatLists
    concatMap
    concatStringsSep
    elem
    elemAt
    filter
    foldl'
    functionArgs
    genList
    head
    isAttrs
    isBool
    isFloat
    isFunction
    isInt
    isList
    isPath
    isString
    length
    listToAttrs
    mapAttrs
    stringLength
    substring
    tail
    toJSON
    zipAttrsWith
    ;

  # -- attribute sets, lists and strings -------------------------------------------------------

  nameValuePair = name: value: { inherit name value; };
  mapAttrs' = f: set: listToAttrs (map (name: f name set.${name}) (attrNames set));
  mapAttrsToList = f: set: map (name: f name set.${name}) (attrNames set);
  filterAttrs =
    pred: set:
    listToAttrs (
      concatMap (name: if pred name set.${name} then [ (nameValuePair name set.${name}) ] else [ ]) (
        attrNames set
      )
    );
  optionalAttrs = cond: set: if cond then set else { };
  optional = cond: x: if cond then [ x ] else [ ];
  optionals = cond: xs: if cond then xs else [ ];
  optionalString = cond: s: if cond then s else "";
  concatMapStrings = f: list: concatStringsSep "" (map f list);
  concatMapStringsSep = sep: f: list: concatStringsSep sep (map f list);
  last = list: elemAt list (length list - 1);
  genAttrs = names: f: builtins.listToAttrs (map (name: { inherit name; value = f name; }) names);
  unique = foldl' (acc: x: if elem x acc then acc else acc ++ [ x ]) [ ];
  hasPrefix = prefix: s: substring 0 (stringLength prefix) s == prefix;
  hasSuffix =
    suffix: s:
    let
      n = stringLength s;
      k = stringLength suffix;
    in
    k <= n && substring (n - k) k s == suffix;
  removePrefix =
    prefix: s:
    if hasPrefix prefix s then substring (stringLength prefix) (stringLength s - stringLength prefix) s else s;
  removeSuffix =
    suffix: s:
    if hasSuffix suffix s then substring 0 (stringLength s - stringLength suffix) s else s;
  toLower = builtins.replaceStrings upperChars lowerChars;
  lowerChars = [
    "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m"
    "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z"
  ];
  upperChars = [
    "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M"
    "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z"
  ];
  isDerivation = x: isAttrs x && x.type or null == "derivation";
  isStringLike = x: isString x || isPath x || x ? outPath || x ? __toString;
  importTOML = path: builtins.fromTOML (builtins.readFile path);
  showOption = loc: concatStringsSep "." loc;

  # -- the module system's vocabulary ---------------------------------------------------------

  # The same closed set of arguments as nixpkgs' mkOption: a misspelt one is an error.
  mkOption =
    {
      default ? null,
      defaultText ? null,
      example ? null,
      description ? null,
      relatedPackages ? null,
      type ? null,
      apply ? null,
      internal ? null,
      visible ? null,
      readOnly ? null,
    }@attrs:
    attrs // { _type = "option"; };
  mkEnableOption =
    name:
    mkOption {
      default = false;
      example = true;
      type = types.bool;
      description = "Whether to enable ${name}.";
    };
  mkIf = condition: content: {
    _type = "if";
    inherit condition content;
  };
  mkMerge = contents: {
    _type = "merge";
    inherit contents;
  };
  mkOverride = priority: content: {
    _type = "override";
    inherit priority content;
  };
  mkOptionDefault = mkOverride 1500;
  mkDefault = mkOverride 1000;
  mkForce = mkOverride 50;
  literalExpression =
    text:
    if isString text then
      {
        _type = "literalExpression";
        inherit text;
      }
    else
      throw "literalExpression expects a string";
  isOption = x: isAttrs x && x._type or null == "option";

  # -- types ----------------------------------------------------------------------------------

  mkOptionType =
    {
      name,
      description ? name,
      check ? (_: true),
      merge ? mergeDefaultOption,
    }:
    {
      _type = "option-type";
      inherit
        name
        description
        check
        merge
        ;
    };

  showValue = v: if isFunction v then "<function>" else toJSON v;
  mergeEqualOption =
    loc: defs:
    let
      first = head defs;
    in
    if all (d: d.value == first.value) defs then
      first.value
    else
      throw "The option `${showOption loc}' has conflicting definition values:${
        concatMapStrings (d: "\n- In `${d.file}': ${showValue d.value}") defs
      }";
  mergeDefaultOption =
    loc: defs:
    let
      values = map (d: d.value) defs;
    in
    if length values == 1 then
      head values
    else if all isList values then
      concatLists values
    else if all isAttrs values then
      foldl' (a: b: a // b) { } values
    else if all isBool values then
      any (x: x) values
    else if all isString values then
      mergeEqualOption loc defs
    else
      throw "Cannot merge definitions of `${showOption loc}'";

  simple =
    name: description: check:
    mkOptionType {
      inherit name description check;
      merge = mergeEqualOption;
    };

  types = rec {
    unspecified = mkOptionType { name = "unspecified"; };
    anything = mkOptionType { name = "anything"; };
    bool = simple "bool" "boolean" isBool;
    int = simple "int" "signed integer" isInt;
    float = simple "float" "floating point number" isFloat;
    number = simple "number" "signed integer or floating point number" (x: isInt x || isFloat x);
    numbers = {
      positive = simple "positive" "positive integer or floating point number, meaning >0" (
        x: (isInt x || isFloat x) && x > 0
      );
      between =
        lowest: highest:
        simple "between" "integer or floating point number between ${toString lowest} and ${toString highest} (both inclusive)" (
          x: (isInt x || isFloat x) && x >= lowest && x <= highest
        );
    };
    ints = {
      positive = simple "positiveInt" "positive integer, meaning >0" (x: isInt x && x > 0);
      unsigned = simple "unsignedInt" "unsigned integer, meaning >=0" (x: isInt x && x >= 0);
    };
    str = simple "str" "string" isString;
    nonEmptyStr = simple "nonEmptyStr" "non-empty string" (x: isString x && x != "");
    lines = mkOptionType {
      name = "lines";
      description = "strings concatenated with \"\\n\"";
      check = isString;
      merge = loc: defs: concatStringsSep "\n" (map (d: d.value) defs);
    };
    path = simple "path" "path" (x: isStringLike x && substring 0 1 (toString x) == "/");
    package = simple "package" "package" isDerivation;
    enum =
      values:
      simple "enum" "one of ${concatMapStringsSep ", " (v: toJSON v) values}" (x: elem x values);

    nullOr =
      elemType:
      mkOptionType {
        name = "nullOr";
        description = "null or ${elemType.description}";
        check = x: x == null || elemType.check x;
        merge =
          loc: defs:
          let
            nulls = filter (d: d.value == null) defs;
          in
          if length nulls == length defs then
            null
          else if nulls != [ ] then
            throw "The option `${showOption loc}' is defined both null and not null, in ${
              concatMapStringsSep ", " (d: "`${d.file}'") defs
            }."
          else
            elemType.merge loc defs;
      };

    either =
      t1: t2:
      mkOptionType {
        name = "either";
        description = "${t1.description} or ${t2.description}";
        check = x: t1.check x || t2.check x;
        merge =
          loc: defs:
          if all (d: t1.check d.value) defs then
            t1.merge loc defs
          else if all (d: t2.check d.value) defs then
            t2.merge loc defs
          else
            mergeEqualOption loc defs;
      };
    addCheck = elemType: check: elemType // { check = x: elemType.check x && check x; };
    oneOf =
      ts:
      if ts == [ ] then throw "types.oneOf needs at least one type" else foldl' either (head ts) (tail ts);

    listOf =
      elemType:
      mkOptionType {
        name = "listOf";
        description = "list of ${elemType.description}";
        check = isList;
        merge =
          loc: defs:
          concatLists (
            genList (
              n:
              let
                def = elemAt defs n;
              in
              concatLists (
                genList (
                  m:
                  let
                    merged =
                      mergeDefinitions
                        (loc ++ [ "[definition ${toString (n + 1)}-entry ${toString (m + 1)}]" ])
                        elemType
                        [
                          {
                            inherit (def) file;
                            value = elemAt def.value m;
                          }
                        ];
                  in
                  optional merged.isDefined merged.value
                ) (length def.value)
              )
            ) (length defs)
          );
      };

    attrsOf =
      elemType:
      mkOptionType {
        name = "attrsOf";
        description = "attribute set of ${elemType.description}";
        check = isAttrs;
        merge =
          loc: defs:
          let
            merged = zipAttrsWith (name: mergeDefinitions (loc ++ [ name ]) elemType) (
              map (
                def:
                mapAttrs (_: value: {
                  inherit (def) file;
                  inherit value;
                }) def.value
              ) defs
            );
          in
          mapAttrs (_: m: m.value) (filterAttrs (_: m: m.isDefined) merged);
      };

    submodule =
      modules:
      mkOptionType {
        name = "submodule";
        description = "submodule";
        check = x: isAttrs x || isFunction x || isPath x;
        merge =
          loc: defs:
          (evalModules {
            modules =
              (if isList modules then modules else [ modules ])
              ++ map (def: {
                _file = def.file;
                imports = [ def.value ];
              }) defs;
            specialArgs = {
              name = last loc;
            };
            prefix = loc;
          }).config;
      };
  };

  # -- definitions: properties pushed down, discharged, overridden, merged ---------------------

  pushDownProperties =
    cfg:
    let
      mapIfAttrs = f: v: if isAttrs v then mapAttrs f v else v;
    in
    if cfg._type or null == "merge" then
      concatMap pushDownProperties cfg.contents
    else if cfg._type or null == "if" then
      map (mapIfAttrs (_: v: mkIf cfg.condition v)) (pushDownProperties cfg.content)
    else if cfg._type or null == "override" then
      map (mapIfAttrs (_: v: mkOverride cfg.priority v)) (pushDownProperties cfg.content)
    else
      [ cfg ];

  dischargeProperties =
    def:
    if def._type or null == "merge" then
      concatMap dischargeProperties def.contents
    else if def._type or null == "if" then
      if isBool def.condition then
        if def.condition then dischargeProperties def.content else [ ]
      else
        throw "‘mkIf’ called with a non-Boolean condition"
    else
      [ def ];

  filterOverrides =
    defs:
    let
      prio = def: if def.value._type or null == "override" then def.value.priority else 100;
      strip = def: if def.value._type or null == "override" then def // { value = def.value.content; } else def;
      highest = foldl' (p: def: if prio def < p then prio def else p) 9999 defs;
    in
    map strip (filter (def: prio def == highest) defs);

  # { isDefined, value } of an option at `loc` of type `type` from its definitions.
  mergeDefinitions =
    loc: type: defs:
    let
      discharged = concatMap (
        def:
        map (value: {
          inherit (def) file;
          inherit value;
        }) (dischargeProperties def.value)
      ) defs;
      kept = filterOverrides discharged;
      checked = map (
        def:
        if type.check def.value then
          def
        else
          throw "A definition for option `${showOption loc}' is not of type `${type.description}'. Definition values:\n- In `${def.file}': ${showValue def.value}"
      ) kept;
    in
    if kept == [ ] then
      { isDefined = false; }
    else
      {
        isDefined = true;
        value = type.merge loc checked;
      };

  evalOption =
    loc: opt: defs:
    let
      type = opt.type or types.unspecified;
      withDefault =
        defs
        ++ optional (opt ? default) {
          file = "the default of `${showOption loc}'";
          value = mkOptionDefault opt.default;
        };
      merged = mergeDefinitions loc type withDefault;
      value =
        if merged.isDefined then
          merged.value
        else
          throw "The option `${showOption loc}' was accessed but has no value defined. Try setting the option.";
    in
    if opt ? apply then opt.apply value else value;

  # -- modules --------------------------------------------------------------------------------

  moduleKeys = [
    "_file"
    "key"
    "imports"
    "options"
    "config"
    "meta"
  ];

  # Every module reachable from `modules`, imports followed, each once, as
  # { file, options, config }.
  collectModules =
    args: modules:
    let
      load =
        file: m:
        let
          fileOf = if isPath m || isString m then toString m else file;
          value = if isPath m || isString m then import m else m;
          applied = if isFunction value then value args else value;
          m' =
            if isAttrs applied then
              applied
            else
              throw "The module in `${fileOf}' is not an attribute set or a function returning one.";
          full = m' ? options || m' ? config;
          stray = filter (k: !(elem k moduleKeys)) (attrNames m');
        in
        if full && stray != [ ] then
          throw "Module `${fileOf}' has an unsupported attribute `${head stray}'. This is caused by introducing a top-level `config' or `options' attribute. Add configuration attributes immediately on the top level instead, or move all of them (namely: ${concatStringsSep " " stray}) into the explicit `config' attribute."
        else
          {
            key = if isPath m || isString m then toString m else m'.key or null;
            file = m'._file or fileOf;
            imports = m'.imports or [ ];
            options = m'.options or { };
            config =
              if full then
                m'.config or { }
              else
                removeAttrs m' [
                  "_file"
                  "key"
                  "imports"
                  "meta"
                ];
          };
      walk =
        seen: file: ms:
        foldl' (
          acc: m:
          let
            loaded = load file m;
          in
          if loaded.key != null && elem loaded.key acc.seen then
            acc
          else
            let
              seen' = acc.seen ++ optional (loaded.key != null) loaded.key;
              inner = walk seen' loaded.file loaded.imports;
            in
            {
              seen = inner.seen;
              found = acc.found ++ [ loaded ] ++ inner.found;
            }
        ) { inherit seen; found = [ ]; } ms;
    in
    (walk [ ] "<unknown file>" modules).found;

  # The option tree of all modules: nested attribute sets whose leaves are options.
  mergeDeclarations =
    loc: a: b:
    if isOption a || isOption b then
      throw "The option `${showOption loc}' is declared more than once, or declared both as an option and as a set of options."
    else
      a
      // mapAttrs (
        name: v:
        if a ? ${name} then
          mergeDeclarations (loc ++ [ name ]) a.${name} v
        else if isOption v || isAttrs v then
          v
        else
          throw "The option declaration `${showOption (loc ++ [ name ])}' is neither an option (mkOption) nor a set of options."
      ) b;

  # The value of the option tree `decls` at `loc` from its definitions (each { file, value }).
  evalTree =
    loc: decls: defs:
    if isOption decls then
      evalOption loc decls defs
    else
      let
        pushed = concatMap (
          def:
          map (
            value:
            if isAttrs value then
              mapAttrs (_: v: {
                inherit (def) file;
                value = v;
              }) value
            else
              throw "A definition for `${showOption loc}' in `${def.file}' is not an attribute set of options, but ${showValue value}."
          ) (pushDownProperties def.value)
        ) defs;
        byName = zipAttrsWith (_: ds: ds) pushed;
        undeclared = filter (name: !(decls ? ${name})) (attrNames byName);
        firstUndeclared = head undeclared;
        result = mapAttrs (name: sub: evalTree (loc ++ [ name ]) sub (byName.${name} or [ ])) decls;
      in
      if undeclared != [ ] then
        throw "The option `${showOption (loc ++ [ firstUndeclared ])}' does not exist. Definition values:${
          concatMapStrings (d: "\n- In `${d.file}'") byName.${firstUndeclared}
        }"
      else
        result;

  evalModules =
    {
      modules,
      specialArgs ? { },
      prefix ? [ ],
    }:
    let
      args = specialArgs // {
        inherit lib config;
      };
      collected = collectModules args modules;
      decls = foldl' (mergeDeclarations prefix) { } (
        map (
          m:
          if isAttrs m.options then
            m.options
          else
            throw "The options of module `${m.file}' are not an attribute set."
        ) collected
      );
      config = evalTree prefix decls (
        map (m: {
          inherit (m) file;
          value = m.config;
        }) collected
      );
    in
    { inherit config; };

  # -- sources --------------------------------------------------------------------------------

  # A stand-in for lib.fileset, on Nix's readDir: a file set is the sorted list of the files in
  # it, directories walked; `toSource` checks they are under its root.
  fileset =
    let
      filesUnder =
        path:
        let
          entries = builtins.readDir path;
        in
        concatMap (
          name:
          let
            type = entries.${name};
            child = path + "/${name}";
          in
          if type == "directory" then
            filesUnder child
          else
            [
              {
                path = child;
                inherit name type;
              }
            ]
        ) (builtins.attrNames entries);
      entriesOf =
        item:
        if item ? _standinFileset then
          item.entries
        else if !(builtins.pathExists item) then
          throw "lib.fileset: ${toString item} does not exist."
        else if (builtins.readDir (dirOf item)).${baseNameOf item} == "directory" then
          filesUnder item
        else
          [
            {
              path = item;
              name = baseNameOf item;
              type = "regular";
            }
          ];
      set = entries: {
        _standinFileset = true;
        entries = builtins.sort (a: b: toString a.path < toString b.path) (
          builtins.attrValues (
            builtins.listToAttrs (
              map (e: {
                name = toString e.path;
                value = e;
              }) entries
            )
          )
        );
      };
    in
    {
      unions = items: set (concatMap entriesOf items);
      fileFilter =
        predicate: path:
        set (
          builtins.filter (
            e:
            predicate {
              inherit (e) name type;
              hasExt = ext: hasSuffix ".${ext}" e.name;
            }
          ) (filesUnder path)
        );
      toList = fs: map (e: e.path) (entriesOf fs);
      toSource =
        { root, fileset }:
        let
          under = e: hasPrefix (toString root + "/") (toString e.path);
        in
        if all under (entriesOf fileset) then
          {
            _type = "fileset-source";
            outPath = "/nix/store/00000000000000000000000000000000-source";
            inherit root;
          }
        else
          throw "lib.fileset.toSource: a file of the set is not under the root ${toString root}.";
    };

  licenses = {
    mit = {
      shortName = "mit";
      spdxId = "MIT";
      fullName = "MIT License";
    };
  };

  lib = {
    inherit
      nameValuePair
      mapAttrs'
      mapAttrsToList
      filterAttrs
      optionalAttrs
      optional
      optionals
      optionalString
      concatMapStrings
      concatMapStringsSep
      last
      unique
      genAttrs
      hasPrefix
      hasSuffix
      removePrefix
      removeSuffix
      toLower
      isDerivation
      isStringLike
      importTOML
      showOption
      mkOption
      mkEnableOption
      mkIf
      mkMerge
      mkOverride
      mkOptionDefault
      mkDefault
      mkForce
      literalExpression
      isOption
      mkOptionType
      types
      evalModules
      fileset
      licenses
      ;
    inherit (builtins)
      attrNames
      attrValues
      concatLists
      concatMap
      concatStringsSep
      elem
      filter
      foldl'
      groupBy
      hasAttr
      head
      length
      listToAttrs
      mapAttrs
      match
      replaceStrings
      stringLength
      substring
      toJSON
      ;
    strings = {
      inherit hasPrefix hasSuffix removePrefix removeSuffix toLower;
    };
    lists = {
      inherit optional optionals unique last;
    };
    attrsets = {
      inherit nameValuePair mapAttrs' mapAttrsToList filterAttrs optionalAttrs;
    };
  };
in
lib
