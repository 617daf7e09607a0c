// Hand-written prose for the generated man pages: what the option tables
// cannot say (what a command is for, how it matches its peer, examples).
// docgen.cpp appends it to each page, as cryptsetup's man pages include
// shared fragments; the option lists stay generated.
#pragma once

#include <span>
#include <string_view>

namespace cli {

// One section of prose. Paragraphs are separated by blank lines; a paragraph
// whose lines all start with four spaces is a literal block (examples).
// The title "DESCRIPTION" continues the generated DESCRIPTION section;
// every other title is a section of its own, placed before SEE ALSO.
struct ManSection {
    std::string_view title;
    std::string_view text;
};

// The prose of blkcrypt-PAGE(8) ("luks", "fsverity-sign"), or of blkcrypt(8)
// for an empty PAGE. Empty when a page has none.
std::span<const ManSection> man_prose(std::string_view page);

}  // namespace cli
