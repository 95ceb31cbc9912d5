# The Node addon: the shared C core plus the Node-API binding, one C11 build
# that loads on every Node >= 20 (Node-API only, no V8 C++ API). node-gyp
# runs in this folder, so its build/ stays here, apart from the repository's
# CMake build/ (node-gyp rebuild deletes the build/ beside binding.gyp).
# The core (the sources core/sources.txt lists) is a static library with its
# private include paths; the binding's src/ sees core/include only.
{
  "target_defaults": {
    "defines": ["NAPI_VERSION=8", "_GNU_SOURCE"],
    "cflags!": ["-fno-exceptions"],
    "cflags_c": ["-std=c11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-Wshadow", "-Wvla",
                 "-fvisibility=hidden"]
  },
  "targets": [
    {
      "target_name": "pyroscope_core",
      "type": "static_library",
      "sources": [
        "<!@(node -e \"for(const l of require('fs').readFileSync('../../core/sources.txt','utf8').split('\\n'))if(l.trim()&&l[0]!=='#')console.log('../../core/'+l.trim())\")"
      ],
      "include_dirs": [
        "../../core/include",
        "../../core/src",
        "../../core/report",
        "../../core/gen"
      ]
    },
    {
      "target_name": "pyroscope_native",
      "dependencies": ["pyroscope_core"],
      "sources": [
        "<!@(node -e \"console.log(require('fs').readdirSync('src').filter(f=>f.endsWith('.c')).sort().map(f=>'src/'+f).join(' '))\")"
      ],
      "include_dirs": [
        "../../core/include",
        "src"
      ],
      "libraries": ["-lprotobuf-c", "-lz", "-lpthread", "-lm", "-ldl"]
    }
  ]
}
