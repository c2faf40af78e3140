// Quantization of PROTOCOL.md §3, bit-exact with the Rust and TypeScript codecs.
//
// Every input is an f32 widened exactly to double; all arithmetic is double in the order the spec
// writes it; results are narrowed to float (round to nearest even). The only integer rounding is
// floor(x + 0.5).
using System;

namespace Zonekeep
{
    /// <summary>The quantizers of PROTOCOL.md §3 (quant, centered, angle, positions).</summary>
    public static class Quant
    {
        /// <summary>2π as the spec writes it.</summary>
        public const double Tau = 6.283185307179586;

        private static void CheckBits(int bits, int lo, int hi, string what)
        {
            if (bits < lo || bits > hi)
                throw new EncodeException(EncodeErrorKind.Invalid, what + " bits " + bits + " not in " + lo + "..=" + hi);
        }

        private static double Pow2(int bits) { return Math.Pow(2, bits); }

        /// <summary><c>steps = 2^bits − 1</c> of a quant field.</summary>
        public static double QuantSteps(int bits) { return Pow2(bits) - 1; }

        /// <summary>§3.1: encodes <paramref name="v"/> in <c>[min, max]</c> with <paramref name="bits"/> bits. NaN → 0; out-of-range values clamp.</summary>
        public static uint QuantEncode(float v, float min, float max, int bits)
        {
            CheckBits(bits, 1, 32, "quant");
            double fv = v;
            if (double.IsNaN(fv)) return 0;
            double lo = min;
            double hi = max;
            double steps = QuantSteps(bits);
            double c = Math.Min(Math.Max(fv, lo), hi);
            double t = (c - lo) / (hi - lo);
            double q = Math.Floor(t * steps + 0.5);
            return (uint)Math.Min(q, steps);
        }

        /// <summary>§3.1: decodes <paramref name="q"/>; <c>q &gt; 2^bits − 1</c> is a <see cref="ProtocolException"/>.</summary>
        public static float QuantDecode(uint q, float min, float max, int bits)
        {
            double steps = QuantSteps(bits);
            if (q > steps) throw new ProtocolException(DecodeErrorKind.Invalid, "quant value " + q + " > " + steps);
            double lo = min;
            double hi = max;
            return (float)(lo + (q * (hi - lo)) / steps);
        }

        /// <summary>§3.2: encodes <paramref name="v"/> on a symmetric range in which 0 is exact. NaN → <c>half</c>.</summary>
        public static uint CenteredEncode(float v, float range, int bits)
        {
            CheckBits(bits, 2, 32, "centered");
            double half = Pow2(bits - 1);
            double fv = v;
            if (double.IsNaN(fv)) return (uint)half;
            double step = range / half;
            double q = Math.Floor(fv / step + 0.5) + half;
            return (uint)Math.Min(Math.Max(q, 0), Pow2(bits) - 1);
        }

        /// <summary>§3.2: decodes <paramref name="q"/>; <c>q ≥ 2^bits</c> is a <see cref="ProtocolException"/>.</summary>
        public static float CenteredDecode(uint q, float range, int bits)
        {
            if (q > Pow2(bits) - 1) throw new ProtocolException(DecodeErrorKind.Invalid, "centered value " + q + " out of range");
            double half = Pow2(bits - 1);
            double step = range / half;
            return (float)((q - half) * step);
        }

        /// <summary>§3.3: encodes an angle in radians, wrapping. NaN and ±∞ → 0.</summary>
        public static uint AngleEncode(float a, int bits)
        {
            CheckBits(bits, 1, 16, "angle");
            double fa = a;
            if (double.IsNaN(fa) || double.IsInfinity(fa)) return 0;
            double n = Pow2(bits);
            double t = fa / Tau;
            t = t - Math.Floor(t);
            double q = Math.Floor(t * n + 0.5);
            return q == n ? 0u : (uint)q;
        }

        /// <summary>§3.3: decodes <paramref name="q"/>; <c>q ≥ 2^bits</c> is a <see cref="ProtocolException"/>.</summary>
        public static float AngleDecode(uint q, int bits)
        {
            double n = Pow2(bits);
            if (q >= n) throw new ProtocolException(DecodeErrorKind.Invalid, "angle value " + q + " out of range");
            return (float)((q * Tau) / n);
        }

        /// <summary>§3.4: a coordinate as an integer number of <paramref name="step"/>s, clamped to i32. NaN → 0.</summary>
        public static int PosEncode(float v, float step)
        {
            double fv = v;
            if (double.IsNaN(fv)) return 0;
            double q = Math.Floor(fv / step + 0.5);
            return (int)Math.Min(Math.Max(q, int.MinValue), int.MaxValue);
        }

        /// <summary>§3.4: the coordinate an integer position stands for.</summary>
        public static float PosDecode(int q, float step)
        {
            return (float)(q * (double)step);
        }
    }
}
