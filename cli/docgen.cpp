#include "docgen.hpp"
#include "man_prose.hpp"
#include "output_file.hpp"

#include <algorithm>
#include <filesystem>
#include <sstream>

namespace cli {
namespace {

// One option as the man page and the completion need it.
struct OptionDoc {
    std::string long_name;    // "cipher"
    char short_name = 0;      // 'c', or 0
    std::string arg;          // "SPEC"; empty for a flag
    std::string default_value;
    std::string description;
    const std::vector<std::string>* scope = nullptr;  // the actions, or null: every action
};

std::vector<OptionDoc> options_of(const CommandLine& cl) {
    std::vector<OptionDoc> out;
    for (const auto& o : cl.options.options()) {
        OptionDoc d;
        d.long_name = o->long_name();
        const std::string names = o->format_name();  // "-c [ --cipher ]" or "--cipher"
        if (names.size() > 1 && names[0] == '-' && names[1] != '-') d.short_name = names[1];
        d.arg = o->format_parameter();  // "SPEC (=default)", empty for flags
        if (const auto p = d.arg.find(" (="); p != std::string::npos && d.arg.back() == ')') {
            d.default_value = d.arg.substr(p + 3, d.arg.size() - p - 4);
            d.arg.resize(p);
        }
        d.description = o->description();
        if (auto s = cl.scopes.find(d.long_name); s != cl.scopes.end()) d.scope = &s->second;
        out.push_back(std::move(d));
    }
    return out;
}

bool applies(const OptionDoc& o, const std::string& action) {
    return !o.scope || std::find(o.scope->begin(), o.scope->end(), action) != o.scope->end();
}

// Option values that name files, so the completion offers file names.
bool takes_file(const OptionDoc& o) { return o.arg == "FILE" || o.arg == "F" || o.arg == "PATH"; }

// Text for roff: backslashes escaped, and a dash that starts an option name
// made a real minus (copy-pasteable, and not a hyphenation point).
std::string esc(std::string_view text) {
    std::string out;
    char prev = ' ';
    for (const char c : text) {
        if (c == '\\') out += "\\e";
        else if (c == '-' && (std::string_view(" \t([|=,'\"").find(prev) != std::string_view::npos || prev == '-'))
            out += "\\-";
        else out += c;
        prev = c;
    }
    return out;
}

// esc() by lines, each ended, none starting with a control character.
std::string roff(std::string_view text) {
    std::string safe;
    std::istringstream lines{std::string(esc(text))};
    for (std::string line; std::getline(lines, line);) {
        if (!line.empty() && (line[0] == '.' || line[0] == '\'')) safe += "\\&";
        safe += line + "\n";
    }
    return safe;
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(' ');
    return b == std::string::npos ? "" : s.substr(b);
}

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

std::string th(const std::string& name) {
    return ".TH " + upper(esc(name)) +
           " 8 \"\" \"blkcrypt " BLKCRYPT_VERSION "\" \"System Administration\"\n";
}

std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

// The hand-written prose of a page (man_prose.hpp): the continuation of its
// DESCRIPTION when description is true, else the sections of their own.
std::string prose(std::string_view page, bool description) {
    std::string m;
    for (const auto& section : man_prose(page)) {
        if ((section.title == "DESCRIPTION") != description) continue;
        if (!description) m += ".SH " + esc(section.title) + "\n";
        std::string_view rest = section.text;
        while (!rest.empty()) {
            const auto end = rest.find("\n\n");
            std::string_view para = rest.substr(0, end);
            rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 2);
            // Indented by four spaces on every line: a literal block.
            std::string literal;
            bool is_literal = true;
            for (std::string_view lines = para; !lines.empty();) {
                const auto nl = lines.find('\n');
                const std::string_view line = lines.substr(0, nl);
                lines = nl == std::string_view::npos ? std::string_view{} : lines.substr(nl + 1);
                if (line.substr(0, 4) != "    ") is_literal = false;
                else literal += std::string(line.substr(4)) + "\n";
            }
            if (is_literal) m += ".PP\n.RS 4\n.nf\n" + roff(literal) + ".fi\n.RE\n";
            else m += ".PP\n" + roff(para);
        }
    }
    return m;
}

}  // namespace

CommandLine describe_command(int (*run)(Args), const std::vector<std::string>& words) {
    std::optional<CommandLine> cl;
    auto* const outer = set_describe_sink(&cl);
    try {
        run(words);
    } catch (...) {
        set_describe_sink(outer);
        throw;
    }
    set_describe_sink(outer);
    if (!cl) throw Failure("a command did not describe its options");
    return std::move(*cl);
}

std::string main_man_page(const std::vector<CommandDoc>& docs) {
    std::string m = th("blkcrypt");
    m += ".SH NAME\nblkcrypt \\- disk\\-image encryption and verification in userspace\n"
         ".SH SYNOPSIS\n"
         "\\fBblkcrypt\\fR [\\fB\\-\\-plugin\\fR \\fIPATH\\fR]... \\fICOMMAND\\fR [\\fIOPTIONS\\fR...]\n.br\n"
         "\\fBblkcrypt \\-\\-help\\fR | \\fB\\-\\-version\\fR\n"
         ".SH DESCRIPTION\n"
         "blkcrypt does in userspace what dm\\-crypt, dm\\-verity and fs\\-verity do in the kernel, "
         "byte for byte: it encrypts and decrypts disk images, builds, checks and reads dm\\-verity "
         "hash trees and computes fs\\-verity digests, with the algorithms of a registry modelled on "
         "the Linux kernel crypto API. Each command has its own page, below, and \\fB\\-\\-help\\fR.\n" +
         prose("", true) + ".SH COMMANDS\n";
    for (const auto& d : docs) m += ".TP\n.BR blkcrypt\\-" + esc(d.name) + " (8)\n" + roff(d.summary);
    m += ".SH GLOBAL OPTIONS\n"
         ".TP\n\\fB\\-\\-plugin\\fR \\fIPATH\\fR\n"
         "Load the plugin PATH before running the command (repeatable, in any position).\n"
         ".TP\n\\fB\\-\\-help\\fR, \\fB\\-h\\fR\nList the commands and exit.\n"
         ".TP\n\\fB\\-\\-version\\fR\nPrint the version and exit.\n"
         ".SH ENVIRONMENT\n"
         ".TP\n.B BLKCRYPT_PLUGIN_PATH\n"
         "Colon\\-separated directories whose *.so plugins are loaded by every command.\n"
         ".SH OUTPUT\n"
         "Results go to stdout, messages to stderr (one line each). With \\fB\\-\\-json\\fR a command "
         "prints its result as JSON, one object per line. Long commands show their progress on stderr "
         "when it is a terminal (\\fB\\-\\-progress\\fR, \\fB\\-\\-no\\-progress\\fR); "
         "\\fB\\-\\-progress\\-json\\fR prints it to stdout as JSON lines, as cryptsetup does.\n"
         ".SH EXIT STATUS\n"
         ".TP\n.B 0\nSuccess.\n"
         ".TP\n.B 1\nThe operation failed (I/O error, failed check, failed self\\-test).\n"
         ".TP\n.B 2\nUsage error: bad option, argument, number, key or algorithm name; also\n"
         "\\fBverity verify\\fR finding corrupted blocks, as \\fBveritysetup verify\\fR does.\n"
         ".TP\n.B 128+N\nInterrupted by signal N (130 for SIGINT, 143 for SIGTERM); temporary files are removed.\n";
    m += prose("", false) + ".SH SEE ALSO\n";
    std::vector<std::string> refs;
    for (const auto& d : docs) refs.push_back(".BR blkcrypt\\-" + esc(d.name) + " (8),");
    m += join(refs, "\n") + "\n.BR cryptsetup (8),\n.BR veritysetup (8),\n.BR fsverity (1)\n";
    return m;
}

std::string command_man_page(const CommandDoc& d) {
    const CommandLine& cl = d.cl;
    std::string m = th("blkcrypt-" + d.name);
    m += ".SH NAME\n" + roff("blkcrypt-" + d.name + " - " + d.summary);
    m += ".SH SYNOPSIS\n.ad l\n";
    // A usage line of its own starts with "blkcrypt"; the others continue it.
    std::istringstream usage(cl.usage);
    bool first = true;
    for (std::string line; std::getline(usage, line);) {
        line = trim(line);
        if (line.empty()) continue;
        if (!first && line.rfind("blkcrypt", 0) == 0) m += ".br\n";
        first = false;
        m += roff(line);
    }
    m += ".ad\n.SH DESCRIPTION\n" + roff(cl.summary) + prose(d.name, true);
    if (!cl.actions.empty()) {
        m += ".SH ACTIONS\n";
        for (const auto& a : cl.actions) m += ".TP\n.B " + roff(a.name) + roff(a.summary);
    }
    m += ".SH OPTIONS\n";
    for (const auto& o : options_of(cl)) {
        std::string head;
        if (o.short_name) head += "\\fB\\-" + std::string(1, o.short_name) + "\\fR, ";
        head += "\\fB" + esc("--" + o.long_name) + "\\fR";
        if (!o.arg.empty()) head += " \\fI" + esc(o.arg) + "\\fR";
        std::string text = o.description;
        if (!text.empty() && text.back() != '.') text += '.';
        if (!o.default_value.empty()) text += " Default: " + o.default_value + ".";
        if (o.scope) text += " Only for " + join(*o.scope, ", ") + ".";
        m += ".TP\n" + head + "\n" + roff(text);
    }
    m += prose(d.name, false) + ".SH SEE ALSO\n.BR blkcrypt (8)\n";
    return m;
}

// "luks1 luks2" for the value name "luks1|luks2", "tcrypt" for "tcrypt" (a
// lower-case value name is the value itself); empty for "FILE".
std::string value_words(const std::string& arg) {
    if (arg.empty() || arg.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789|") != std::string::npos) return {};
    std::string w = arg;
    std::replace(w.begin(), w.end(), '|', ' ');
    return w;
}

std::string bash_completion(const std::vector<CommandDoc>& docs, const std::vector<CommandAlias>& aliases) {
    std::vector<std::string> names;
    for (const auto& d : docs) names.push_back(d.name);
    for (const auto& a : aliases) names.push_back(a.name);
    std::string s =
        "# bash completion for blkcrypt. Generated by `blkcrypt --generate-bash-completion`\n"
        "# from the commands' option tables (the same as --help): do not edit.\n\n"
        "# _blkcrypt_spec COMMAND ACTION: sets actions, opts (for ACTION, or all),\n"
        "# valopts (options taking a value) and fileopts (those whose value is a file).\n"
        "_blkcrypt_spec() {\n"
        "    actions= opts= valopts= fileopts=\n"
        "    case $1 in\n";
    for (const auto& d : docs) {
        const auto opts = options_of(d.cl);
        std::vector<std::string> acts, val, file, all;
        for (const auto& a : d.cl.actions) acts.push_back(a.name);
        for (const auto& o : opts) {
            all.push_back("--" + o.long_name);
            if (o.arg.empty()) continue;
            val.push_back("--" + o.long_name);
            if (o.short_name) val.push_back(std::string("-") + o.short_name);
            if (takes_file(o)) {
                file.push_back("--" + o.long_name);
                if (o.short_name) file.push_back(std::string("-") + o.short_name);
            }
        }
        s += "    " + d.name + ")\n";
        s += "        actions=\"" + join(acts, " ") + "\"\n";
        s += "        valopts=\"" + join(val, " ") + "\"\n";
        s += "        fileopts=\"" + join(file, " ") + "\"\n";
        s += "        case $2 in\n";
        for (const auto& a : acts) {
            std::vector<std::string> mine;
            for (const auto& o : opts)
                if (applies(o, a)) mine.push_back("--" + o.long_name);
            s += "        " + a + ") opts=\"" + join(mine, " ") + "\" ;;\n";
        }
        s += "        *) opts=\"" + join(all, " ") + "\" ;;\n        esac ;;\n";
    }
    s += "    esac\n"
         "}\n\n"
         "# _blkcrypt_values COMMAND OPTION: the values OPTION takes, where it names them.\n"
         "_blkcrypt_values() {\n"
         "    case $1 in\n";
    for (const auto& d : docs) {
        std::string cases;
        for (const auto& o : options_of(d.cl)) {
            const std::string w = value_words(o.arg);
            if (w.empty()) continue;
            cases += "        --" + o.long_name + (o.short_name ? std::string("|-") + o.short_name : "") + ") echo \"" + w +
                     "\" ;;\n";
        }
        if (!cases.empty()) s += "    " + d.name + ")\n        case $2 in\n" + cases + "        esac ;;\n";
    }
    s += "    esac\n"
         "}\n\n"
         "# _blkcrypt_alias WORD: cryptsetup's action names (luksDump) as command and action.\n"
         "_blkcrypt_alias() {\n"
         "    case $1 in\n";
    for (const auto& a : aliases) s += "    " + a.name + ") cmd=" + a.command + " action=" + a.action + " ;;\n";
    s += "    esac\n"
         "}\n\n"
         "_blkcrypt() {\n"
         "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
         "    local cmd= action= i w actions opts valopts fileopts\n"
         "    COMPREPLY=()\n"
         "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "        w=${COMP_WORDS[i]}\n"
         "        if [[ $w == --plugin ]]; then ((i++)); continue; fi\n"
         "        if [[ -z $cmd ]]; then\n"
         "            [[ $w == -* ]] || { cmd=$w; _blkcrypt_alias \"$w\"; }\n"
         "            continue\n"
         "        fi\n"
         "        _blkcrypt_spec \"$cmd\" \"\"\n"
         "        if [[ \" $valopts \" == *\" $w \"* ]]; then ((i++)); continue; fi\n"
         "        [[ $w == -* ]] && continue\n"
         "        if [[ -z $action && -n $actions ]]; then action=$w; fi\n"
         "    done\n"
         "    if [[ $prev == --plugin ]]; then\n"
         "        COMPREPLY=($(compgen -f -- \"$cur\"))\n"
         "        return\n"
         "    fi\n"
         "    if [[ -z $cmd ]]; then\n"
         "        if [[ $cur == -* ]]; then\n"
         "            COMPREPLY=($(compgen -W \"--help --version --plugin\" -- \"$cur\"))\n"
         "        else\n"
         "            COMPREPLY=($(compgen -W \"" + join(names, " ") + " help\" -- \"$cur\"))\n"
         "        fi\n"
         "        return\n"
         "    fi\n"
         "    _blkcrypt_spec \"$cmd\" \"$action\"\n"
         "    if [[ \" $valopts \" == *\" $prev \"* ]]; then\n"
         "        if [[ \" $fileopts \" == *\" $prev \"* ]]; then\n"
         "            COMPREPLY=($(compgen -f -- \"$cur\"))\n"
         "        else\n"
         "            COMPREPLY=($(compgen -W \"$(_blkcrypt_values \"$cmd\" \"$prev\")\" -- \"$cur\"))\n"
         "        fi\n"
         "        return\n"
         "    fi\n"
         "    if [[ $cur == -* ]]; then\n"
         "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
         "    elif [[ -n $actions && -z $action ]]; then\n"
         "        COMPREPLY=($(compgen -W \"$actions\" -- \"$cur\"))\n"
         "    else\n"
         "        COMPREPLY=($(compgen -f -- \"$cur\"))\n"
         "    fi\n"
         "}\n"
         "complete -o filenames -F _blkcrypt blkcrypt\n";
    return s;
}

void write_man_pages(const std::vector<CommandDoc>& docs, const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw Failure(dir + ": " + ec.message());
    auto put = [&](const std::string& name, const std::string& text) {
        write_output(dir + "/" + name, blkcrypt::ConstBytes(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
                     OutputOptions{.role = "a man page"});
    };
    put("blkcrypt.8", main_man_page(docs));
    for (const auto& d : docs) put("blkcrypt-" + d.name + ".8", command_man_page(d));
}

}  // namespace cli
