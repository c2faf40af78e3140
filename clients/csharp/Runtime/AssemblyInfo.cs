// The test runner (build.sh's Zonekeep.Tests.exe, Unity's Zonekeep.Tests assembly) reads its JSON with the
// library's own reader (MiniJson) rather than a copy of it.
using System.Runtime.CompilerServices;

[assembly: InternalsVisibleTo("Zonekeep.Tests")]
