# Reads pip's output (make install) and prints a few lines instead of hundreds: every 25th package pip finds,
# then how many it installs; pip's ERROR lines pass through. pip's whole output is in .venv/install.log.
# Package lines: "Collecting X" (from an index) or "Processing /path/X.whl" (a local wheel, e.g. find-links).
function packages(n) { n += 0; return n " package" (n == 1 ? "" : "s") }
/^(Collecting|Processing) / { found++; if (found % 25 == 0) { printf "      %s found...\n", packages(found); fflush() } next }
/^Installing collected packages: / {
    sub(/^Installing collected packages: /, "")
    printf "      %s found; installing %d (quiet for a while)...\n", packages(found), split($0, names, /, /)
    fflush(); installing = 1; next
}
/^Successfully installed / { printf "      %d installed\n", NF - 2; fflush(); next }
/^Requirement already satisfied: / { present++; next }
/^ERROR/ { print; fflush(); errors++ }
END { if (!installing && !errors) printf "      nothing new to install (%s already there)\n", packages(present) }
