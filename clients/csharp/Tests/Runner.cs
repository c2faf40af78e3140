// A self-contained test runner: every public static or instance method marked [Test] in this assembly runs
// once, in name order within its class; each prints PASS, FAIL or SKIPPED; the last line is the plain
// "N passed, N failed, N skipped" summary; the exit code is 1 when any failed.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;

namespace Zonekeep.Tests
{
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class TestAttribute : Attribute { }

    /// <summary>
    /// Marks a static method returning <c>IEnumerable&lt;KeyValuePair&lt;string, Action&gt;&gt;</c>: each pair is one
    /// test of its own (a data-driven test, e.g. one per fixture file).
    /// </summary>
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class TestSourceAttribute : Attribute { }

    /// <summary>Thrown by a test that cannot run here (a missing service); reported as SKIPPED.</summary>
    public sealed class SkipException : Exception
    {
        public SkipException(string reason) : base(reason) { }
    }

    public static class Runner
    {
        public static int Main(string[] args)
        {
            string filter = args.Length > 0 ? args[0] : null;
            int passed = 0, failed = 0, skipped = 0;
            List<string> failures = new List<string>();
            Type[] types = typeof(Runner).Assembly.GetTypes().OrderBy(t => t.FullName, StringComparer.Ordinal).ToArray();
            foreach (Type type in types)
            {
                MethodInfo[] tests = type.GetMethods(BindingFlags.Public | BindingFlags.Static | BindingFlags.Instance | BindingFlags.DeclaredOnly)
                    .Where(m => m.GetCustomAttributes(typeof(TestAttribute), false).Length > 0)
                    .OrderBy(m => m.MetadataToken)
                    .ToArray();
                foreach (MethodInfo m in tests)
                {
                    string name = type.Name + "." + m.Name;
                    if (filter != null && name.IndexOf(filter, StringComparison.OrdinalIgnoreCase) < 0) continue;
                    object target = m.IsStatic ? null : Activator.CreateInstance(type);
                    Run(name, () => m.Invoke(target, null), ref passed, ref failed, ref skipped, failures);
                }
                MethodInfo[] sources = type.GetMethods(BindingFlags.Public | BindingFlags.Static | BindingFlags.DeclaredOnly)
                    .Where(m => m.GetCustomAttributes(typeof(TestSourceAttribute), false).Length > 0)
                    .OrderBy(m => m.MetadataToken)
                    .ToArray();
                foreach (MethodInfo m in sources)
                {
                    var cases = (IEnumerable<KeyValuePair<string, Action>>)m.Invoke(null, null);
                    foreach (var c in cases)
                    {
                        string name = type.Name + "." + m.Name + "[" + c.Key + "]";
                        if (filter != null && name.IndexOf(filter, StringComparison.OrdinalIgnoreCase) < 0) continue;
                        Action body = c.Value;
                        Run(name, () => { try { body(); } catch (Exception e) { throw new TargetInvocationException(e); } }, ref passed, ref failed, ref skipped, failures);
                    }
                }
            }
            if (failures.Count > 0) Console.WriteLine("failed: " + string.Join(", ", failures));
            Console.WriteLine(passed + " passed, " + failed + " failed, " + skipped + " skipped");
            return failed == 0 ? 0 : 1;
        }

        private static void Run(string name, Action invoke, ref int passed, ref int failed, ref int skipped, List<string> failures)
        {
            DateTime start = DateTime.UtcNow;
            try
            {
                invoke();
                passed++;
                Console.WriteLine("PASS " + name + " (" + (int)(DateTime.UtcNow - start).TotalMilliseconds + " ms)");
            }
            catch (TargetInvocationException e) when (e.InnerException is SkipException)
            {
                string reason = e.InnerException.Message;
                if (Environment.GetEnvironmentVariable("CI") == "true")
                {
                    failed++;
                    failures.Add(name);
                    Console.WriteLine("FAIL " + name + ": " + reason + ", and CI=true requires it");
                    return;
                }
                skipped++;
                string line = "SKIPPED: C# SDK " + name + ": " + reason;
                Console.WriteLine(line);
                string log = Environment.GetEnvironmentVariable("ZONEKEEP_SKIPPED_LOG");
                if (!string.IsNullOrEmpty(log)) File.AppendAllText(log, line + "\n");
            }
            catch (TargetInvocationException e)
            {
                failed++;
                failures.Add(name);
                Console.WriteLine("FAIL " + name + ": " + e.InnerException.GetType().Name + ": " + e.InnerException.Message);
                Console.Error.WriteLine(e.InnerException.StackTrace);
            }
        }
    }

    /// <summary>Assertions that throw with a message naming what differed.</summary>
    public static class Check
    {
        public static void True(bool cond, string what)
        {
            if (!cond) throw new Exception("assertion failed: " + what);
        }

        public static void Equal<T>(T want, T got, string what = "")
        {
            if (!EqualityComparer<T>.Default.Equals(want, got))
                throw new Exception("assertion failed: " + what + ": want " + Show(want) + ", got " + Show(got));
        }

        public static string Show(object o)
        {
            if (o == null) return "null";
            if (o is string) return "\"" + o + "\"";
            if (o is double) return ((double)o).ToString("R", System.Globalization.CultureInfo.InvariantCulture);
            return o.ToString();
        }

        /// <summary>Runs <paramref name="fn"/> and returns the exception of type <typeparamref name="E"/> it threw.</summary>
        public static E Throws<E>(Action fn, string what) where E : Exception
        {
            try
            {
                fn();
            }
            catch (E e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new Exception("assertion failed: " + what + ": threw " + e.GetType().Name + " (" + e.Message + "), want " + typeof(E).Name);
            }
            throw new Exception("assertion failed: " + what + ": did not throw");
        }

        /// <summary>The error kind <paramref name="fn"/> is refused with, or "ok".</summary>
        public static string Kind(Action fn)
        {
            try
            {
                fn();
                return "ok";
            }
            catch (ProtocolException e)
            {
                return ProtocolException.KindName(e.Kind);
            }
        }
    }
}
