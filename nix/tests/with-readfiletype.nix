# Imports a Nix file tree (nixpkgs' lib) with `builtins.readFileType`, which Nix added in 2.14,
# written on `builtins.readDir` for an older Nix (Debian's is 2.8), so that nixpkgs' own
# lib.fileset runs there: every file the tree imports sees the same `builtins`.
path:
let
  builtins' = builtins // {
    readFileType = file: (builtins.readDir (dirOf file)).${baseNameOf file};
  };
  importWith = file: scopedImport { builtins = builtins'; import = importWith; } file;
in
if builtins ? readFileType then import path else importWith path
