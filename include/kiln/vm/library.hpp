// SPDX-License-Identifier: Apache-2.0
/// \file
/// Executables as shared libraries (the design's `export_library` / `load_module`): an executable
/// compiled with `exec_mode::compiled` carries the C++ of its functions (`generated_source`);
/// `export_library` builds it, with the executable's bytecode and constants embedded, into a
/// shared library with the system's C++ compiler, and `load_module` opens such a library and
/// returns the executable, its compiled functions attached (`executable::code`).
///
/// \code
/// vm::executable ex = kiln::compile(m, {.mode = kiln::exec_mode::compiled});
/// vm::export_library(ex, "model.so");                 // runs the C++ compiler
/// vm::executable loaded = vm::load_module("model.so");
/// vm::virtual_machine machine(loaded, {}, kiln::vm::kernel_registry());
/// \endcode
///
/// The compiler is `export_options::compiler`, else `$CXX`, else the compiler kiln was configured
/// with, else `c++`; it gets kiln's include directory (`export_options::kiln_include_dir`, else
/// `$KILN_INCLUDE_DIR`, else the one the CMake target recorded, ...), C++20 and
/// `export_options::flags` (`-O3 -march=native` by default). A compiler that cannot be run, or
/// that fails, is a `library_error` with its command line and its own messages.
///
/// **Loading a library is trusting it**: the dynamic loader runs the library's constructors, and
/// those of the libraries it depends on, as it loads it. Load only libraries you built or trust,
/// as with any plugin. What `load_module` checks before the loader sees the file, reading its
/// bytes only: that it is a whole ELF shared library for this machine, and that it exports kiln's
/// description (`kiln_library_info_v1`) -- so a file that is not a kiln library is refused before
/// any of its code runs. After loading it reads the description (constant data) and refuses, with
/// a `library_error` saying why, a library built by another kiln version or C++ library, or one
/// built for CPU features this machine lacks; the embedded executable is checked as
/// `load_executable` checks a file. Each call loads the file as it is now (a private copy: the
/// dynamic loader would hand back an earlier load of the same path). Libraries stay loaded until
/// the process ends (`RTLD_NODELETE`): tensors made by their code may outlive every executable.
#pragma once

#include <kiln/support/error.hpp>
#include <kiln/support/file.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/vm/compiled.hpp>
#include <kiln/vm/executable.hpp>
#include <kiln/vm/serialize.hpp>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace kiln::vm {

/// A library that cannot be built or loaded.
class library_error : public error {
public:
  using error::error;
};

struct export_options {
  /// The C++ compiler; empty: `$CXX`, else the one kiln was configured with, else `c++`.
  std::string compiler = {};
  /// Flags besides `-std=c++20 -shared -fPIC` and the include directories.
  std::vector<std::string> flags = {"-O3", "-march=native"};
  /// Include directories besides kiln's own (where xsimd is, when it is not in a system directory).
  std::vector<std::string> include_dirs = {};
  /// kiln's own include directory; empty: found as `detail::find_kiln_include_dir` says (the
  /// environment variable `KILN_INCLUDE_DIR`, the path the CMake target records, ...).
  std::filesystem::path kiln_include_dir = {};
  /// When set, the C++ the library is built from is also written here (to read or debug it).
  std::filesystem::path source_copy = {};
};

namespace detail {

/// Where kiln's headers are, for the compiler `export_library` runs: the first of these that
/// holds `kiln/vm/compiled.hpp` --
///   1. `export_options::kiln_include_dir`;
///   2. the environment variable `KILN_INCLUDE_DIR`;
///   3. `KILN_INCLUDE_DIR_HINT`, which the `kiln::kiln` CMake target defines: the source tree's
///      `include/` in a build tree, the package's in an installed kiln (relocatable with it);
///   4. the directory this header was included from (`__FILE__`): as it is when absolute; when
///      the program was compiled with a relative `-I`, against the working directory and the
///      program's own folder and its parents;
///   5. `<program folder>/../include`, `/usr/local/include`, `/usr/include` (an installed kiln).
/// None: a `library_error` listing the places tried.
inline std::filesystem::path find_kiln_include_dir(const std::filesystem::path& given) {
  namespace fs = std::filesystem;
  std::vector<fs::path> tried;
  auto holds = [&](const fs::path& dir) {
    if (dir.empty()) return false;
    tried.push_back(dir);
    std::error_code ec;
    return fs::is_regular_file(dir / "kiln" / "vm" / "compiled.hpp", ec);
  };
  if (!given.empty()) {
    if (holds(given)) return given;
    throw library_error("kiln::vm::export_library: export_options::kiln_include_dir '" + given.string() +
                        "' does not hold kiln's headers (no kiln/vm/compiled.hpp in it)");
  }
  if (const char* env = std::getenv("KILN_INCLUDE_DIR"); env && *env) {
    if (holds(env)) return env;
    throw library_error("kiln::vm::export_library: KILN_INCLUDE_DIR='" + std::string(env) +
                        "' does not hold kiln's headers (no kiln/vm/compiled.hpp in it)");
  }
#if defined(KILN_INCLUDE_DIR_HINT)
  if (holds(KILN_INCLUDE_DIR_HINT)) return KILN_INCLUDE_DIR_HINT;
#endif
  const fs::path here = fs::path(__FILE__).parent_path().parent_path().parent_path();  // <include>/kiln/vm/library.hpp
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path exe_dir = ec ? fs::path() : exe.parent_path();
  if (here.is_absolute()) {
    if (holds(here)) return here;
  } else {
    if (holds(fs::current_path(ec) / here)) return fs::current_path(ec) / here;
    for (fs::path dir = exe_dir; !dir.empty(); dir = dir.parent_path()) {
      if (holds(dir / here)) return dir / here;
      if (dir == dir.root_path()) break;
    }
  }
  for (const fs::path& dir : {exe_dir.empty() ? fs::path() : exe_dir.parent_path() / "include", fs::path("/usr/local/include"), fs::path("/usr/include")})
    if (holds(dir)) return dir;
  std::string list;
  for (const fs::path& t : tried) list += "\n    " + t.string();
  throw library_error("kiln::vm::export_library: cannot find kiln's headers, which the C++ compiler needs; tried:" + list +
                      "\n  give their directory in export_options::kiln_include_dir or the environment variable KILN_INCLUDE_DIR");
}

inline std::string default_compiler() {
  if (const char* cxx = std::getenv("CXX"); cxx && *cxx) return cxx;
#if defined(KILN_DEFAULT_CXX)
  return KILN_DEFAULT_CXX;
#else
  return "c++";
#endif
}

inline std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// A directory removed (with what is in it) when this goes.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string t = (std::filesystem::temp_directory_path() / "kiln-library-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw library_error("kiln::vm::export_library: cannot make a temporary directory: " + std::string(std::strerror(errno)));
    path = t;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs `argv` with its output (stdout and stderr) going to `log`; returns its exit status, or
/// throws when it cannot be started or did not exit normally.
inline int run_process(const std::vector<std::string>& argv, const std::filesystem::path& log, const std::string& command_text) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw library_error("kiln::vm::export_library: cannot run the C++ compiler '" + argv[0] + "': " + std::strerror(rc) +
                        " (set export_options::compiler or $CXX)\n  command: " + command_text);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw library_error("kiln::vm::export_library: waiting for the C++ compiler failed: " + std::string(std::strerror(errno)));
  if (WIFSIGNALED(status))
    throw library_error("kiln::vm::export_library: the C++ compiler was killed by signal " + std::to_string(WTERMSIG(status)) +
                        "\n  command: " + command_text + "\n" + read_text(log));
  return WEXITSTATUS(status);
}

/// The names of the features in `bits`.
inline std::string feature_list(std::uint64_t bits) {
  std::string s;
  for (std::size_t i = 0; i < 64; ++i)
    if (bits & (std::uint64_t(1) << i))
      s += (s.empty() ? "" : ", ") +
           (i < std::size(compiled::cpu_feature_names) ? std::string(compiled::cpu_feature_names[i]) : "feature bit " + std::to_string(i));
  return s.empty() ? "none" : s;
}

/// Checks that `bytes` are a whole ELF shared library for this machine before the dynamic loader
/// maps them: a file cut short would be mapped past its end (and fault when touched).
inline void check_elf(std::string_view bytes, const std::string& where) {
  auto fail = [&](const std::string& why) { throw library_error(where + ": " + why); };
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "\x7f" "ELF", 4) != 0) fail("not a shared library (no ELF header)");
  Elf64_Ehdr eh;
  if (bytes.size() < sizeof eh) fail("not a shared library (the ELF header is cut short)");
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) fail("not a 64-bit ELF file");
  if (eh.e_ident[EI_DATA] != (std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB)) fail("an ELF file of the other byte order");
  if (eh.e_type != ET_DYN) fail("an ELF file, but not a shared library");
#if defined(__x86_64__)
  if (eh.e_machine != EM_X86_64) fail("a shared library for another machine (ELF machine " + std::to_string(eh.e_machine) + ")");
#elif defined(__aarch64__)
  if (eh.e_machine != EM_AARCH64) fail("a shared library for another machine (ELF machine " + std::to_string(eh.e_machine) + ")");
#endif
  auto inside = [&](std::uint64_t offset, std::uint64_t size) { return offset <= bytes.size() && size <= bytes.size() - offset; };
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || !inside(eh.e_phoff, std::uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr)))
    fail("the ELF program headers lie outside the file (cut short?)");
  for (std::size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_NULL && !inside(ph.p_offset, ph.p_filesz))
      fail("ELF segment " + std::to_string(i) + " lies outside the file (cut short?): bytes " + std::to_string(ph.p_offset) + " to " +
           std::to_string(ph.p_offset + ph.p_filesz) + " of " + std::to_string(bytes.size()));
  }
  if (eh.e_shnum != 0 && (eh.e_shentsize != sizeof(Elf64_Shdr) || !inside(eh.e_shoff, std::uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr))))
    fail("the ELF section headers lie outside the file (cut short?)");
  // A kiln library exports its description: a library that does not is refused here, before the
  // dynamic loader would run its constructors (and its dependencies').
  const auto section = [&](std::size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  };
  for (std::size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr symtab = section(i);
    if (symtab.sh_type != SHT_DYNSYM) continue;
    if (symtab.sh_link >= eh.e_shnum || !inside(symtab.sh_offset, symtab.sh_size)) fail("its dynamic symbol table lies outside the file");
    const Elf64_Shdr strtab = section(symtab.sh_link);
    if (!inside(strtab.sh_offset, strtab.sh_size)) fail("its dynamic symbol names lie outside the file");
    const std::string_view names = bytes.substr(strtab.sh_offset, strtab.sh_size);
    constexpr std::string_view wanted = "kiln_library_info_v1";
    for (std::uint64_t at = 0; at + sizeof(Elf64_Sym) <= symtab.sh_size; at += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, bytes.data() + symtab.sh_offset + at, sizeof sym);
      if (sym.st_shndx == SHN_UNDEF || sym.st_name >= names.size()) continue;
      const std::string_view name = names.substr(sym.st_name);
      if (name.substr(0, name.find('\0')) == wanted) return;
    }
  }
  fail("not a kiln library (it exports no kiln_library_info_v1; it was not loaded, and none of its code ran)");
}

}  // namespace detail

/// The C++ `export_library` compiles for `ex`, with the executable's bytes in the file `data`.
inline std::string library_source(const executable& ex, const std::filesystem::path& data) {
  std::string s = ex.generated_source;
  std::string ns = "kiln_generated";
  if (auto p = s.find("\nnamespace "); p != std::string::npos) ns = s.substr(p + 11, s.find(' ', p + 11) - p - 11);
  const std::string path = data.string();
  if (path.find_first_of("\"\\\n") != std::string::npos)
    throw library_error("kiln::vm::export_library: the temporary path '" + path + "' has a quote, a backslash or a newline; set $TMPDIR");
  s += "\n// ---- the library's description, for kiln::vm::load_module ----\n\n";
  s += "// The executable (bytecode, function table, constants), embedded as read-only data.\n";
  s += "__asm__(\".section .rodata.kiln_executable,\\\"a\\\"\\n\"\n";
  s += "        \".balign 64\\n\"\n";
  s += "        \".globl kiln_executable_begin\\n.hidden kiln_executable_begin\\n\"\n";
  s += "        \".globl kiln_executable_end\\n.hidden kiln_executable_end\\n\"\n";
  s += "        \"kiln_executable_begin:\\n\"\n";
  s += "        \".incbin \\\"" + path + "\\\"\\n\"\n";
  s += "        \"kiln_executable_end:\\n\"\n";
  s += "        \".previous\\n\");\n";
  s += "extern \"C\" __attribute__((visibility(\"hidden\"))) const unsigned char kiln_executable_begin[];\n";
  s += "extern \"C\" __attribute__((visibility(\"hidden\"))) const unsigned char kiln_executable_end[];\n\n";
  s += "extern \"C\" __attribute__((visibility(\"default\"))) constinit const kiln::vm::compiled::library_info kiln_library_info_v1 = {\n";
  s += "    kiln::vm::compiled::library_info::magic_value, kiln::version, kiln::vm::compiled::abi_tag, sizeof(kiln::vm::value),\n";
  s += "    kiln::vm::compiled::cpu_features_compiled_for(), __VERSION__, kiln_executable_begin, kiln_executable_end,\n";
  s += "    &" + ns + "::add_functions};\n";
  return s;
}

/// Builds `ex` (compiled with `exec_mode::compiled`) into the shared library `path`.
inline void export_library(const executable& ex, const std::filesystem::path& path, const export_options& options = {}) {
  if (ex.generated_source.empty())
    throw library_error("kiln::vm::export_library: the executable has no generated code; compile it with exec_mode::compiled");
  const std::filesystem::path include = detail::find_kiln_include_dir(options.kiln_include_dir);
  detail::temp_dir dir;
  const std::filesystem::path data = dir.path / "executable.kx", source = dir.path / "library.cpp", out = dir.path / "library.so",
                              log = dir.path / "compiler.log";
  save_executable(ex, data);
  const std::string text = library_source(ex, data);
  // The library and the source copy are staged before the compiler runs, so that a target that
  // cannot be written fails before the compile, and neither is replaced unless both are written.
  kiln::detail::staged_files outputs("kiln::vm::export_library");
  try {
    kiln::detail::write_file(source, text, "kiln::vm::export_library");
    if (!options.source_copy.empty()) outputs.add(options.source_copy).write(text);
  } catch (const library_error&) {
    throw;
  } catch (const error& e) {
    throw library_error(e.what());
  }
  kiln::detail::staged_file* library = nullptr;
  try {
    library = &outputs.add(path);
  } catch (const error& e) {
    throw library_error(e.what());
  }
  std::vector<std::string> argv = {options.compiler.empty() ? detail::default_compiler() : options.compiler, "-std=c++20", "-shared", "-fPIC",
                                   "-fvisibility-inlines-hidden"};
  for (auto& f : options.flags) argv.push_back(f);
  argv.push_back("-I" + include.string());
  for (auto& d : options.include_dirs) argv.push_back("-I" + d);
  argv.insert(argv.end(), {"-o", out.string(), source.string()});
  std::string command;
  for (auto& a : argv) command += (command.empty() ? "" : " ") + detail::shell_quote(a);
  const int status = detail::run_process(argv, log, command);
  if (status != 0)
    throw library_error("kiln::vm::export_library: the C++ compiler failed (exit status " + std::to_string(status) + ")\n  command: " + command +
                        "\n" + detail::read_text(log));
  try {
    library->write(kiln::detail::read_file(out, "kiln::vm::export_library"));
    outputs.commit();
  } catch (const error& e) {
    throw library_error(e.what());
  }
}

/// Opens the library `path` built by `export_library` and returns its executable with the
/// compiled functions attached.
inline executable load_module(const std::filesystem::path& path) {
  const std::string where = "kiln::vm::load_module: '" + path.string() + "'";
  std::vector<std::byte> data;
  try {
    data = kiln::detail::read_file(path, "kiln::vm::load_module");
  } catch (const error& e) {
    throw library_error(e.what());
  }
  const std::string_view bytes(reinterpret_cast<const char*>(data.data()), data.size());
  detail::check_elf(bytes, where);
  // The dynamic loader hands back a library already loaded from the same path, even when the file
  // has been replaced since: each load writes the bytes just checked to a private copy under a
  // fresh name and opens that, so that what is loaded is what was checked, and is the file as it
  // is now.
  std::string copy = (std::filesystem::temp_directory_path() / "kiln-module-XXXXXX.so").string();
  {
    const int fd = ::mkstemps(copy.data(), 3);
    if (fd < 0) throw library_error(where + ": cannot make a temporary copy to load: " + std::string(std::strerror(errno)));
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ::ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string why = n < 0 ? std::strerror(errno) : "nothing written";
        ::close(fd);
        std::error_code ec;
        std::filesystem::remove(copy, ec);
        throw library_error(where + ": cannot make a temporary copy to load: " + why);
      }
      done += std::size_t(n);
    }
    if (::close(fd) != 0) {
      const std::string why = std::strerror(errno);
      std::error_code ec;
      std::filesystem::remove(copy, ec);
      throw library_error(where + ": cannot make a temporary copy to load: " + why);
    }
  }
  void* handle = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  {
    std::error_code ec;
    std::filesystem::remove(copy, ec);  // the mapping stays
  }
  if (!handle) {
    const char* why = ::dlerror();
    std::string text = why ? why : "unknown error";
    if (auto at = text.find(copy); at != std::string::npos) text.replace(at, copy.size(), path.string());
    throw library_error(where + ": cannot be loaded: " + text);
  }
  const auto* info = static_cast<const compiled::library_info*>(::dlsym(handle, "kiln_library_info_v1"));
  if (!info) throw library_error(where + ": not a kiln library (it has no kiln_library_info_v1)");
  if (info->magic != compiled::library_info::magic_value) throw library_error(where + ": not a kiln library (its description has the wrong magic number)");
  if (std::strcmp(info->kiln_version, kiln::version) != 0)
    throw library_error(where + ": built by kiln " + kiln::detail::printable(info->kiln_version) + ", this program has kiln " + kiln::version +
                        "; rebuild it with export_library");
  if (std::strcmp(info->abi, compiled::abi_tag) != 0 || info->value_size != sizeof(value))
    throw library_error(where + ": built against another C++ library (" + kiln::detail::printable(info->abi) + ", this program uses " +
                        compiled::abi_tag + ")");
  const std::uint64_t missing = info->cpu_features & ~compiled::cpu_features_available();
  if (missing)
    throw library_error(where + ": built for CPU features this machine lacks: " + detail::feature_list(missing) +
                        " (built by " + kiln::detail::printable(info->compiler) + "; rebuild it here, or with export_options::flags for an older -march)");
  if (!info->executable_begin || info->executable_end < info->executable_begin)
    throw library_error(where + ": its embedded executable is missing");
  executable ex = deserialize(std::span<const std::byte>(reinterpret_cast<const std::byte*>(info->executable_begin),
                                                         std::size_t(info->executable_end - info->executable_begin)),
                              path.string());
  try {
    return compiled::attach(std::move(ex), info->add_functions);
  } catch (const usage_error& e) {
    throw library_error(where + ": " + e.what());
  }
}

}  // namespace kiln::vm
