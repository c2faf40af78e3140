// The arena demo's movement rule as a C# client needs it (examples/arena-rules in the repository), so a
// client can predict its own player. The input, its payload, the entity kinds and the events are the code
// `zonekeep codegen --kind arena --lang cs` wrote (Generated/Arena.g.cs). Every arithmetic step is one f32 operation, rounded to float explicitly, as in
// the Rust rule, so the prediction agrees with the zone's positions.
using System;
using System.Collections.Generic;
using Zonekeep;
using Zonekeep.Samples.Arena;

namespace ZonekeepSamples
{
    /// <summary>A player's movement state: its position (world units, y down on screen).</summary>
    public struct MoveState
    {
        public float X;
        public float Y;

        public MoveState(float x, float y)
        {
            X = x;
            Y = y;
        }
    }

    /// <summary>A round obstacle.</summary>
    public struct Pillar
    {
        public float X;
        public float Y;
        public float R;
    }

    /// <summary>The arena's constants and movement step.</summary>
    public static class ArenaRules
    {
        public const float ArenaW = 120f;
        public const float ArenaH = 80f;
        public const float PlayerRadius = 0.6f;
        public const float Speed = 8f;
        public const float WalkSpeed = 3f;
        public const int TickHz = 30;
        /// <summary>One tick in seconds as f32.</summary>
        public static readonly float Dt = (float)(1.0 / 30.0);
        public const float PosStep = 0.01f;
        /// <summary>1/√2 as f32.</summary>
        public static readonly float Diagonal = (float)0.7071067811865476;

        // The contract's bits, as bytes for building a MoveInput.
        public const byte DirUp = (byte)ArenaConstants.DIR_UP;
        public const byte DirDown = (byte)ArenaConstants.DIR_DOWN;
        public const byte DirLeft = (byte)ArenaConstants.DIR_LEFT;
        public const byte DirRight = (byte)ArenaConstants.DIR_RIGHT;
        public const byte DirMask = (byte)ArenaConstants.DIR_MASK;
        public const byte FlagWalk = (byte)ArenaConstants.FLAG_WALK;
        public const byte FlagMask = (byte)ArenaConstants.FLAG_MASK;

        public static readonly float MinX = PlayerRadius;
        public static readonly float MaxX = (float)(ArenaW - PlayerRadius);
        public static readonly float MinY = PlayerRadius;
        public static readonly float MaxY = (float)(ArenaH - PlayerRadius);

        /// <summary>Snaps a coordinate to the position quantum, exactly as a client decodes it from the wire.</summary>
        public static float Snap(float v) { return Quant.PosDecode(Quant.PosEncode(v, PosStep), PosStep); }

        /// <summary>Moves <paramref name="s"/> by one input over <paramref name="dt"/> seconds, around the pillars, inside the arena, snapped.</summary>
        public static MoveState Step(MoveState s, MoveInput input, float dt, IList<Pillar> pillars)
        {
            float dx = 0f, dy = 0f;
            if ((input.Dir & DirRight) != 0) dx = (float)(dx + 1f);
            if ((input.Dir & DirLeft) != 0) dx = (float)(dx - 1f);
            if ((input.Dir & DirDown) != 0) dy = (float)(dy + 1f);
            if ((input.Dir & DirUp) != 0) dy = (float)(dy - 1f);
            if (dx == 0f && dy == 0f) return s;
            float speed = (input.Flags & FlagWalk) != 0 ? WalkSpeed : Speed;
            float len = (float)(speed * dt);
            if (dx != 0f && dy != 0f) len = (float)(len * Diagonal);
            float x = (float)(s.X + (float)(dx * len));
            float y = (float)(s.Y + (float)(dy * len));
            for (int i = 0; i < pillars.Count; i++)
            {
                Pillar p = pillars[i];
                float ex = (float)(x - p.X);
                float ey = (float)(y - p.Y);
                float min = (float)(p.R + PlayerRadius);
                float d2 = (float)((float)(ex * ex) + (float)(ey * ey));
                if (d2 >= (float)(min * min)) continue;
                if (d2 > 0f)
                {
                    // Out along the line from the centre, to the rim: sliding around the pillar.
                    float k = (float)(min / (float)Math.Sqrt(d2));
                    x = (float)(p.X + (float)(ex * k));
                    y = (float)(p.Y + (float)(ey * k));
                }
                else x = (float)(p.X + min);
            }
            x = Math.Min(Math.Max(x, MinX), MaxX);
            y = Math.Min(Math.Max(y, MinY), MaxY);
            return new MoveState(Snap(x), Snap(y));
        }

        /// <summary>The pillars in the known set (global entities), in id order like the zone's list.</summary>
        public static List<Pillar> ReadPillars(Mirror mirror)
        {
            List<Pillar> out_ = new List<Pillar>();
            int kind = mirror.Schema.KindIndex(PillarEntity.KindName);
            foreach (MirrorEntity e in mirror.Entities())
            {
                if (e.Kind != kind) continue;
                out_.Add(new Pillar { X = mirror.X(e), Y = mirror.Y(e), R = PillarEntity.Read(e.Fields).Radius });
            }
            return out_;
        }
    }
}
