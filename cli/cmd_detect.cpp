// blkcrypt dump|test-passphrase|decrypt|table|open IMAGE, and serve IMAGE:
// the format comes from IMAGE's signature (containers::detect), or from
// --type where it has none, as `cryptsetup open --type` names it. The words
// are then handed to that format's command unchanged (`blkcrypt dump X` runs
// `blkcrypt luks dump X`), so every option means what it means there and
// the output is the format command's own.
#include "commands.hpp"
#include "container_common.hpp"
#include "detect.hpp"
#include "docgen.hpp"

#include <blkcrypt/containers/container.hpp>

#include <algorithm>
#include <utility>

namespace cli {
namespace {

using blkcrypt::containers::Format;

// The formats --type names, and the command that reads each.
struct Type {
    std::string_view name;
    std::string_view command;
    int (*run)(Args);
};
constexpr Type kTypes[] = {
    {"luks", "luks", run_luks},       {"luks1", "luks", run_luks},     {"luks2", "luks", run_luks},
    {"plain", "crypt", run_crypt},    {"loopaes", "loopaes", run_loopaes}, {"tcrypt", "tcrypt", run_tcrypt},
    {"bitlk", "bitlk", run_bitlk},    {"fvault2", "fvault2", run_fvault2},
};

// The commands whose options may appear in the words. Where two give one
// short name different meanings, the first wins: -h is --hash (luks, tcrypt,
// loopaes, crypt, and cryptsetup), not bitlk's --help.
struct FormatCommand {
    std::string_view name;
    int (*run)(Args);
};
constexpr FormatCommand kFormatCommands[] = {{"luks", run_luks},       {"tcrypt", run_tcrypt}, {"loopaes", run_loopaes},
                                             {"crypt", run_crypt},     {"bitlk", run_bitlk},   {"fvault2", run_fvault2},
                                             {"verity", run_verity}};

constexpr std::size_t kFormatCount = std::size(kFormatCommands);

// The option table of kFormatCommands[i], described when first needed
// (nothing runs; the scan usually needs luks's only).
const CommandLine& format_table(std::size_t i) {
    static std::optional<CommandLine> tables[kFormatCount];
    if (!tables[i]) tables[i].emplace(describe_command(kFormatCommands[i].run, {}));
    return *tables[i];
}

const Type* find_type(std::string_view name) {
    for (const auto& t : kTypes)
        if (t.name == name) return &t;
    return nullptr;
}

std::string type_list(bool raw) {
    std::string s;
    for (const auto& t : kTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s + (raw ? ", raw" : "");
}

// The words as the format's command will parse them: which are positional
// (IMAGE, OUT), and the few options this layer reads itself.
struct Scan {
    std::vector<std::string> forward;     // the words to hand on: all but --type and --test-passphrase
    std::vector<std::size_t> positional;  // indices into forward
    std::optional<std::string> type, header, export_name;
    bool help = false, dm_table = false, test_passphrase = false;
};

// Whether the option NAME ("key-file", or "-d") takes a value, by the
// command's own table, then the formats' in order; nullopt when none knows it.
std::optional<bool> takes_value(const po::options_description& own, const std::string& name) {
    const auto* o = own.find_nothrow(name, false, false, false);
    for (std::size_t i = 0; !o && i < kFormatCount; ++i) o = format_table(i).options.find_nothrow(name, false, false, false);
    if (!o) return std::nullopt;
    return o->semantic()->max_tokens() > 0;
}

// Reads the words as Boost's parser (the commands' style) will: "--name",
// "--name=VALUE", "--name VALUE", clusters of short options "-qd FILE",
// "-dFILE", and "--" before positional words only. --type/-M is taken out
// (the format commands have their own, or none for this action), and so is
// open's --test-passphrase.
Scan scan(Args args, const po::options_description& own, const std::string& command) {
    Scan s;
    auto unknown = [&](const std::string& opt) {
        return UsageError("unknown option '" + opt + "' (see blkcrypt " + command + " --help)");
    };
    bool options_end = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& w = args[i];
        if (options_end || w.size() < 2 || w[0] != '-') {
            s.positional.push_back(s.forward.size());
            s.forward.push_back(w);
            continue;
        }
        if (w == "--") {
            options_end = true;
            s.forward.push_back(w);
            continue;
        }
        if (w[1] == '-') {
            const std::size_t eq = w.find('=');
            const std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
            const auto valued = takes_value(own, name);
            if (!valued) throw unknown("--" + name);
            std::optional<std::string> value;
            std::vector<std::string> words{w};
            if (eq != std::string::npos) {
                value = w.substr(eq + 1);
            } else if (*valued && i + 1 < args.size()) {
                value = args[++i];
                words.push_back(*value);
            }
            if (name == "type") {
                if (!value) throw UsageError("--type needs a value: " + type_list(command == "serve" || command == "open"));
                s.type = value;
                continue;
            }
            if (name == "test-passphrase") {
                s.test_passphrase = true;
                continue;
            }
            if (name == "help") s.help = true;
            if (name == "dm-table") s.dm_table = true;
            if (name == "header" && value) s.header = value;
            if (name == "export-name" && value) s.export_name = value;
            s.forward.insert(s.forward.end(), words.begin(), words.end());
            continue;
        }
        // Short options: flags up to the first one that takes a value, which
        // takes the rest of the word or the next word.
        std::string kept = "-";
        for (std::size_t j = 1; j < w.size(); ++j) {
            const std::string opt = std::string("-") + w[j];
            const auto valued = takes_value(own, opt);
            if (!valued) throw unknown(opt);
            if (!*valued) {
                if (opt == "-h") s.help = true;  // where no table makes it --hash
                kept += w[j];
                continue;
            }
            std::vector<std::string> words;
            std::optional<std::string> value;
            if (j + 1 < w.size()) {
                value = w.substr(j + 1);
            } else if (i + 1 < args.size()) {
                value = args[++i];
                words.push_back(*value);
            }
            if (opt == "-M") {
                if (!value) throw UsageError("-M needs a value: " + type_list(command == "serve" || command == "open"));
                s.type = value;
                words.clear();
            } else {
                kept += w.substr(j);
            }
            if (kept != "-") s.forward.push_back(kept);
            s.forward.insert(s.forward.end(), words.begin(), words.end());
            kept.clear();
            break;
        }
        if (kept.size() > 1) s.forward.push_back(kept);
    }
    return s;
}

// Runs `blkcrypt COMMAND ACTION WORDS...`.
int run_format(int (*run)(Args), std::string_view action, const std::vector<std::string>& words) {
    std::vector<std::string> all{std::string(action)};
    all.insert(all.end(), words.begin(), words.end());
    return run(all);
}

// What IMAGE (or the detached header) is, read without blocking: a FIFO, a
// directory or a socket is refused at once (exit 4).
blkcrypt::Result<Format> detect_path(const std::string& path, const std::string& role) {
    auto store = open_container_image(path, false, role);
    return blkcrypt::containers::detect(*store);
}

// cryptsetup's words when the header is not the LUKS version --type names.
void check_luks_version(std::string_view type, const std::string& path, const std::string& role) {
    if (type == "luks") return;  // either version: the luks command reads the header itself
    auto found = detect_path(path, role);
    const Format want = type == "luks1" ? Format::Luks1 : Format::Luks2;
    if (!found && found.status() != blkcrypt::Status::NotFound) throw Failure(found.error().message);
    if (!found || *found != want) throw Failure("Device " + path + " is not a valid LUKS device.");
}

// The actions a format without a header does not have, refused in
// cryptsetup's words where it has some.
void check_action(std::string_view type, std::string_view action) {
    const bool headerless = type == "plain" || type == "loopaes";
    if (!headerless) return;
    if (action == "test-passphrase")
        throw UsageError("Option --test-passphrase is allowed only for open of LUKS, TCRYPT, BITLK and FVAULT2 devices.");
    if (action == "dump")
        throw UsageError("--type " + std::string(type) + ": " + (type == "plain" ? "plain dm-crypt" : "loop-AES") +
                         " has no header to dump");
}

// The common part of every detecting command. `own`: the caller's option
// table (the words may use its options too).
Routed route(std::string_view action, Args args, const po::options_description& own, const std::string& command) {
    const Scan s = scan(args, own, command);
    if (s.help) return {.help = true};
    const bool serve = action == "serve";
    if (s.dm_table) {
        if (s.type) throw UsageError("--type and --dm-table exclude each other (the table names its targets)");
        return {};
    }
    const Type* type = nullptr;
    if (s.type) {
        if (*s.type == "raw") {
            if (!serve) throw UsageError("--type raw is for serve and open only (the image's bytes as they are)");
            return {};
        }
        type = find_type(*s.type);
        if (!type)
            throw UsageError("Unrecognized metadata device type " + *s.type + ". (--type takes " + type_list(serve) + ")");
        check_action(type->name, action);
    }
    if (s.positional.empty()) return {};  // the caller says what is missing
    const std::string& image = s.forward[s.positional.front()];
    // A detached header holds the signature (luks, tcrypt --header).
    const std::string& probe = s.header ? *s.header : image;
    const std::string role = s.header ? "--header" : "IMAGE";
    if (type) {
        if (type->command == "luks") check_luks_version(type->name, probe, role);
        return {.status = run_format(type->run, action, s.forward)};
    }
    auto found = detect_path(probe, role);
    if (!found) {
        if (found.status() != blkcrypt::Status::NotFound) throw Failure(found.error().message);
        if (serve) return {};
        throw Failure("Device " + probe + " is not a valid LUKS device. It has no BitLocker, FileVault 2 or " +
                      "dm-verity signature either; name its format with --type (" + type_list(false) + ").");
    }
    switch (*found) {
    case Format::Luks1:
    case Format::Luks2: return {.status = run_format(run_luks, action, s.forward)};
    case Format::Bitlk: return {.status = run_format(run_bitlk, action, s.forward)};
    case Format::Fvault2: return {.status = run_format(run_fvault2, action, s.forward)};
    case Format::Verity:
        // No secret: a hash device is served as it is, and read with its root hash.
        if (serve) return {};
        if (action == "dump") return {.status = run_format(run_verity, action, s.forward)};
        throw Failure(probe + " holds a dm-verity superblock: blkcrypt verity verify, read, table or serve " +
                      "reads it with its root hash");
    case Format::Integrity:
        // No secret either: serve (open) serves the checked device, as
        // integritysetup open maps it (--type raw serves the bytes as they are).
        if (serve || action == "dump") return {.status = run_format(run_integrity, action, s.forward)};
        throw Failure(probe + " holds a dm-integrity superblock: blkcrypt integrity read, verify or serve reads it");
    }
    throw Failure(probe + ": unknown format");
}

// --- the commands' own tables (help, man page, completion) -------------------

struct Top {
    std::string_view name;    // "dump"
    std::string_view action;  // the format commands' action ("serve" for open)
    const char* usage;
    const char* what;         // the first sentences of the summary
};

constexpr Top kTops[] = {
    {"dump", "dump", "blkcrypt dump [--type TYPE] [OPTIONS] IMAGE",
     "Print the metadata of IMAGE as cryptsetup's dump of its format does\n"
     "(luksDump, bitlkDump, fvault2Dump, tcryptDump, veritysetup dump)."},
    {"test-passphrase", "test-passphrase", "blkcrypt test-passphrase [--type TYPE] [OPTIONS] IMAGE",
     "Check a secret against IMAGE, as cryptsetup open --test-passphrase: exit 0 when\n"
     "it opens the container, 2 when it does not."},
    {"decrypt", "decrypt", "blkcrypt decrypt [--type TYPE] [OPTIONS] IMAGE OUT",
     "Write to OUT the plaintext that cryptsetup open maps for IMAGE."},
    {"table", "table", "blkcrypt table [--type TYPE] [--show-key] [OPTIONS] IMAGE",
     "Print the dm table lines that cryptsetup open loads for IMAGE, the key hidden\n"
     "unless --show-key."},
    {"open", "serve",
     "blkcrypt open [--type TYPE] [OPTIONS] (--socket PATH | --port N) IMAGE [NAME]\n"
     "       blkcrypt open --test-passphrase [--type TYPE] [OPTIONS] IMAGE",
     "cryptsetup open, as a network block device: IMAGE unlocked and its plaintext\n"
     "served as blkcrypt serve does (read-write unless --read-only). NAME, the name\n"
     "of cryptsetup's mapping, is the NBD export name here (--export-name).\n"
     "--test-passphrase only checks the secret (blkcrypt test-passphrase)."},
};

const std::string kDetectText =
    "\nThe format is read from IMAGE's signature (LUKS1, LUKS2, also from a secondary\n"
    "LUKS2 header, BitLocker, FileVault 2, a dm-verity or dm-integrity superblock),\n"
    "or named with --type where there is none (tcrypt, loopaes, plain). The words\n"
    "then go to the format's command (blkcrypt luks ACTION ...), whose options below\n"
    "all apply.";

// Adds to `out` the options of the format commands that have this action,
// once each, within their scope.
void add_format_options(po::options_description& out, const po::options_description& own, std::string_view action) {
    auto known = [&](const po::option_description& o) {
        const std::string shrt = o.canonical_display_name(po::command_line_style::allow_dash_for_short);
        for (const auto* d : {&own, static_cast<const po::options_description*>(&out)}) {
            if (d->find_nothrow(o.long_name(), false, false, false)) return true;
            if (shrt.size() == 2 && shrt[0] == '-' && d->find_nothrow(shrt, false, false, false)) return true;
        }
        return false;
    };
    for (std::size_t i = 0; i < kFormatCount; ++i) {
        const std::string_view name = kFormatCommands[i].name;
        const CommandLine& cl = format_table(i);
        if (name == "verity" && action != "dump") continue;
        const bool has = std::any_of(cl.actions.begin(), cl.actions.end(), [&](const Action& a) { return a.name == action; });
        if (!has) continue;
        for (const auto& o : cl.options.options()) {
            if (o->long_name() == "help" || known(*o)) continue;
            if (auto sc = cl.scopes.find(o->long_name());
                sc != cl.scopes.end() && std::find(sc->second.begin(), sc->second.end(), action) == sc->second.end())
                continue;
            out.add(o);
        }
    }
}

CommandLine top_command_line(const Top& top, const po::options_description* serve_own) {
    CommandLine cl{top.usage, std::string(top.what) + kDetectText};
    const bool serve = top.action == "serve";
    cl.options.add_options()(
        "type,M", po::value<std::string>()->value_name(type_value_name(serve)),
        serve ? "the format, as cryptsetup open --type names it (luks1/luks2 must match the header); "
                "raw: serve IMAGE's bytes as they are (the default without a signature)"
              : "the format, as cryptsetup open --type names it (luks1/luks2 must match the header)");
    if (top.name == "open")
        cl.options.add_options()("test-passphrase", po::bool_switch(),
                                 "only check the secret, as blkcrypt test-passphrase (NAME is then ignored)");
    po::options_description passed("Options of the format's command (blkcrypt luks, tcrypt, bitlk, fvault2, "
                                   "loopaes, crypt" + std::string(top.action == "dump" ? ", verity" : "") + ")");
    if (serve_own)
        for (const auto& o : serve_own->options())
            if (!cl.options.find_nothrow(o->long_name(), false, false, false)) passed.add(o);
    add_format_options(passed, cl.options, top.action);
    cl.options.add(passed);
    return cl;
}

int run_top(const Top& top, Args args) {
    std::optional<CommandLine> serve_cl;
    if (top.name == "open") serve_cl.emplace(serve_command_line());
    CommandLine cl = top_command_line(top, serve_cl ? &serve_cl->options : nullptr);
    const std::string name(top.name);
    if (args.empty()) {
        // Describe mode (the man page and completion) or no words at all.
        if (!parse_command_line(cl, args)) return 0;
        throw UsageError(name + " needs IMAGE (see blkcrypt " + name + " --help)");
    }
    if (top.name == "open") {
        const Scan s = scan(args, cl.options, name);
        if (s.help) {
            parse_command_line(cl, std::vector<std::string>{"--help"});
            return 0;
        }
        if (s.positional.size() > 2) throw UsageError("open takes IMAGE and at most one NAME");
        std::vector<std::string> words = s.forward;
        std::optional<std::string> mapping;  // cryptsetup's mapping name: the NBD export's here
        if (s.positional.size() == 2) {
            mapping = words[s.positional[1]];
            words.erase(words.begin() + static_cast<std::ptrdiff_t>(s.positional[1]));
        }
        if (s.type) words.insert(words.begin(), "--type=" + *s.type);
        // With --test-passphrase NAME is ignored, as cryptsetup ignores it.
        if (s.test_passphrase) return run_test_passphrase_detected(words);
        if (mapping) {
            if (s.export_name && *s.export_name != *mapping)
                throw UsageError("NAME '" + *mapping + "' and --export-name '" + *s.export_name +
                                 "' both name the export: give one");
            if (!s.export_name) words.insert(words.begin(), "--export-name=" + *mapping);
        }
        return run_serve(words);
    }
    const Routed r = route(top.action, args, cl.options, name);
    if (r.status) return *r.status;
    if (r.help) {
        parse_command_line(cl, std::vector<std::string>{"--help"});
        return 0;
    }
    throw UsageError(name + " needs IMAGE (see blkcrypt " + name + " --help)");
}

}  // namespace

std::string type_value_name(bool raw) {
    std::string s;
    for (const auto& t : kTypes) s += (s.empty() ? "" : "|") + std::string(t.name);
    return s + (raw ? "|raw" : "");
}

Routed route_serve(Args args, const po::options_description& own) {
    if (args.empty()) return {};
    return route("serve", args, own, "serve");
}

int run_dump_detected(Args args) { return run_top(kTops[0], args); }
int run_test_passphrase_detected(Args args) { return run_top(kTops[1], args); }
int run_decrypt_detected(Args args) { return run_top(kTops[2], args); }
int run_table_detected(Args args) { return run_top(kTops[3], args); }
int run_open(Args args) { return run_top(kTops[4], args); }

}  // namespace cli
